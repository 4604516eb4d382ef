"""analysis.overwrite on its own: which later write may change the memory an op read
(`Overwrites.first_writer`), and which store may change the one element a scalar load read
(`Overwrites.first_element_writer`).

Each function is lowered with `zymo.ir` and analysed with every array parameter active; ops
are found by kind, rule key and the parameter they read or write. A case fails when a write
that can change the value read is missed (a wrong gradient) or when one that cannot is
reported (a needless copy on the tape).
"""
import numpy as np

import zymo
from zymo.analysis.activity import analyze
from zymo.analysis.overwrite import Overwrites
from zymo.ir.core import walk


def lowered(f, *args, aliases=None):
    fn = zymo.ir(f, *args)
    aliases = list(range(len(args))) if aliases is None else aliases
    act = analyze(fn, [isinstance(a, np.ndarray) for a in args], aliases)
    return fn, Overwrites(fn, act)


def ops(fn, kind, key=None, base=None):
    return [op for op in walk(fn.body) if op.kind == kind
            and (key is None or op.attrs.get("key") == key)
            and (base is None or op.args[0].hint == base)]


def param(fn, name):
    (p,) = [p for p in fn.params if p.hint == name]
    return p


def read_then_write(x):
    s = np.sum(np.sin(x))
    x[0] = 0.0
    return s


def test_a_later_store_overwrites_what_an_op_read():
    fn, ow = lowered(read_then_write, np.ones(3))
    (sin,), (store,) = ops(fn, "prim", "numpy.sin"), ops(fn, "setitem")
    assert ow.first_writer(sin, param(fn, "x")) is store


def write_then_read(x):
    x[0] = 0.0
    return np.sum(np.sin(x))


def test_a_store_before_the_read_does_not_count():
    fn, ow = lowered(write_then_read, np.ones(3))
    (sin,) = ops(fn, "prim", "numpy.sin")
    assert ow.first_writer(sin, param(fn, "x")) is None


def other_array(x, y):
    s = np.sum(np.sin(x))
    y[0] = 0.0
    return s


def test_a_store_into_other_memory_does_not_count():
    fn, ow = lowered(other_array, np.ones(3), np.ones(3))
    (sin,) = ops(fn, "prim", "numpy.sin")
    assert ow.first_writer(sin, param(fn, "x")) is None


def test_a_store_into_a_possible_alias_counts():
    """`x` and `y` in one alias class may be one array at run time."""
    fn, ow = lowered(other_array, np.ones(3), np.ones(3), aliases=[0, 0])
    (sin,), (store,) = ops(fn, "prim", "numpy.sin"), ops(fn, "setitem")
    assert ow.first_writer(sin, param(fn, "x")) is store


def through_view(x):
    s = np.sum(np.sin(x))
    v = x[1:]
    v[0] = 0.0
    return s


def test_a_store_through_a_view_counts():
    fn, ow = lowered(through_view, np.ones(3))
    (sin,), (store,) = ops(fn, "prim", "numpy.sin"), ops(fn, "setitem")
    assert ow.first_writer(sin, param(fn, "x")) is store


def out_write(x, y):
    s = np.sum(np.sin(x))
    np.cos(y, out=x)
    return s


def test_an_out_call_is_a_write():
    fn, ow = lowered(out_write, np.ones(3), np.ones(3))
    (sin,), (cos,) = ops(fn, "prim", "numpy.sin"), ops(fn, "prim", "numpy.cos")
    assert ow.first_writer(sin, param(fn, "x")) is cos
    assert ow.first_writer(sin, param(fn, "y")) is None


def fresh(x):
    t = np.sin(x)
    u = np.cos(t)
    t[0] = 0.0
    return np.sum(u) + np.sum(t)


def test_a_store_into_a_fresh_array_overwrites_only_that_array():
    fn, ow = lowered(fresh, np.ones(3))
    (sin,), (cos,), (store,) = ops(fn, "prim", "numpy.sin"), ops(fn, "prim", "numpy.cos"), ops(fn, "setitem")
    assert ow.first_writer(cos, sin.results[0]) is store
    assert ow.first_writer(cos, param(fn, "x")) is None


def in_place(x):
    np.sin(x, out=x)
    return np.sum(x)


def test_include_self_counts_the_op_itself():
    fn, ow = lowered(in_place, np.ones(3))
    (sin,) = ops(fn, "prim", "numpy.sin")
    assert ow.first_writer(sin, param(fn, "x")) is None
    assert ow.first_writer(sin, param(fn, "x"), include_self=True) is sin


def loop_write_first(x, n):
    s = 0.0
    for i in range(n):
        x[0] = float(i)
        s += np.sum(np.sin(x))
    return s


def test_a_store_earlier_in_a_loop_body_runs_again_after_the_read():
    fn, ow = lowered(loop_write_first, np.ones(3), 3)
    (sin,), (store,) = ops(fn, "prim", "numpy.sin"), ops(fn, "setitem")
    assert ow.first_writer(sin, param(fn, "x")) is store


def test_a_value_without_known_memory_is_assumed_overwritten():
    fn, ow = lowered(read_then_write, np.ones(3))
    (sin,) = ops(fn, "prim", "numpy.sin")
    del ow.act.roots[param(fn, "x").id]
    assert ow.first_writer(sin, param(fn, "x")) is sin


# -- one element ------------------------------------------------------------------------


def step_ahead(x, n):
    s = 0.0
    for i in range(n - 1):
        a = x[i]
        x[i + 1] = a * 0.5
        s += a
    return s


def step_behind(x, n):
    s = 0.0
    for i in range(n - 1):
        a = x[i + 1]
        x[i] = a * 0.5
        s += a
    return s


def test_a_loop_that_writes_ahead_of_its_reads_overwrites_no_element_read():
    """Iteration i reads x[i] and writes x[i + 1]: no later run writes an element already read."""
    fn, ow = lowered(step_ahead, np.ones(4), 4)
    (load,) = ops(fn, "getitem", base="x")
    assert ow.first_element_writer(load) is None
    assert ow.first_writer(load, param(fn, "x")) is not None       # the array as a whole is written


def test_a_loop_that_writes_behind_its_reads_may_overwrite_the_element_read():
    """Iteration i reads x[i + 1]; the next iteration writes x[i + 1]."""
    fn, ow = lowered(step_behind, np.ones(4), 4)
    (load,), (store,) = ops(fn, "getitem", base="x"), ops(fn, "setitem")
    assert ow.first_element_writer(load) is store


def stride_two(x, n):
    s = 0.0
    for i in range(0, n - 1, 2):
        a = x[i + 1]
        x[i] = a * 0.5
        s += a
    return s


def test_a_step_larger_than_the_offset_keeps_elements_apart():
    """Step 2: iteration i reads x[i + 1], later ones write x[i + 2], x[i + 4], ..."""
    fn, ow = lowered(stride_two, np.ones(6), 6)
    (load,) = ops(fn, "getitem", base="x")
    assert ow.first_element_writer(load) is None


def from_one(x, n):
    s = 0.0
    for i in range(1, n):
        a = x[i - 1]
        x[i] = a * 0.5
        s += a
    return s


def from_zero(x, n):
    s = 0.0
    for i in range(n):
        a = x[i - 1]
        x[i] = a * 0.5
        s += a
    return s


def test_a_negative_index_counts_from_the_end():
    """`x[i - 1]` from i = 1 names x[0], x[1], ...; from i = 0 it first names x[-1], the
    element the last iteration writes."""
    fn, ow = lowered(from_one, np.ones(4), 4)
    assert ow.first_element_writer(ops(fn, "getitem", base="x")[0]) is None
    fn, ow = lowered(from_zero, np.ones(4), 4)
    (load,), (store,) = ops(fn, "getitem", base="x"), ops(fn, "setitem")
    assert ow.first_element_writer(load) is store


def constants(x):
    a = x[0]
    x[1] = 2.0
    b = x[1]
    x[1] = 3.0
    return a + b


def test_constant_indices():
    fn, ow = lowered(constants, np.ones(3))
    read0, read1 = ops(fn, "getitem", base="x")
    _, second = ops(fn, "setitem")
    assert ow.first_element_writer(read0) is None                   # x[1] is another element
    assert ow.first_element_writer(read1) is second                 # x[1] written again


def rows(A, n):
    s = 0.0
    for i in range(n - 1):
        a = A[i, 0]
        A[i + 1] = a      # a whole row: the index names fewer dimensions than A has
        s += a
    return s


def test_a_row_store_ahead_of_the_row_read():
    fn, ow = lowered(rows, np.ones((4, 2)), 4)
    (load,) = ops(fn, "getitem", base="A")
    assert ow.first_element_writer(load) is None


def view_in_loop(x, n):
    s = 0.0
    for i in range(n - 1):
        v = x[i:]
        a = v[0]
        v[1] = a * 0.5
        s += a
    return s


def test_a_view_taken_in_a_loop_falls_back_to_the_whole_array():
    """A view made in each iteration is other memory every time: no element reasoning."""
    fn, ow = lowered(view_in_loop, np.ones(4), 4)
    (store,) = ops(fn, "setitem")
    (load,) = [op for op in ops(fn, "getitem") if op.args[0] is store.args[0]]
    assert ow.first_element_writer(load) is store
