"""analysis.activity on its own: which values are active, which memory receives active data,
which parameters need a shadow, and the memory roots behind them (`analyze`, `Activity`).

Each function is lowered with `zymo.ir` and analysed with chosen active parameters and alias
classes; values are found by their op (kind, rule key, the array a load reads), never by the
names the frontend gives them. Each case fails if the analysis marked too much or too little.
"""
import numpy as np

import zymo
from zymo.analysis.activity import analyze
from zymo.ir.core import walk


def carries(loop):
    """A loop's results by the name of their initial value."""
    return {init.hint: r for init, r in zip(loop.args[3:], loop.results)}


def ops(fn, kind, key=None, base=None):
    """The ops of `fn` of `kind` (and rule `key`, or reading parameter `base`), in program order."""
    return [op for op in walk(fn.body) if op.kind == kind
            and (key is None or op.attrs.get("key") == key)
            and (base is None or op.args[0].hint == base)]


def result(fn, kind, key=None, base=None, k=0):
    return ops(fn, kind, key, base)[k].results[0]


def param(fn, name):
    (p,) = [p for p in fn.params if p.hint == name]
    return p


def run(f, args, active, aliases=None, seed_return=True):
    fn = zymo.ir(f, *args)
    aliases = list(range(len(args))) if aliases is None else aliases
    return fn, analyze(fn, active, aliases, seed_return)


def scale(x, a, n):
    b = a * 3.0
    m = n * 2
    return np.sum(x * b) + m


def test_active_follows_the_active_parameters():
    fn, act = run(scale, (np.ones(3), 2.0, 4), [False, True, False])
    assert act.is_active(param(fn, "a"))
    assert act.is_active(result(fn, "prim", "mul"))                 # a * 3.0
    assert not act.is_active(result(fn, "prim", "mul", k=1))       # n * 2: an int
    assert not act.is_active(param(fn, "x"))                        # Const memory, never written
    assert act.shadow_params == []


def test_a_constant_float_is_not_active():
    fn, act = run(scale, (np.ones(3), 2.0, 4), [True, False, False])
    assert not act.is_active(param(fn, "a"))
    assert not act.is_active(result(fn, "prim", "mul"))             # a * 3.0: a Const float
    assert act.is_active(result(fn, "prim", "mul", k=2))            # x * b
    assert act.is_active(result(fn, "prim", "numpy.sum"))
    assert act.shadow_params == [0]


def writes_const(x, y):
    y[0] = x[1] * 2.0
    return np.sum(y)


def test_const_memory_that_receives_active_data_gets_a_shadow():
    fn, act = run(writes_const, (np.ones(3), np.ones(3)), [True, False])
    assert act.is_active(param(fn, "y"))
    assert act.shadow_params == [0, 1]
    assert act.writes_memory


def test_const_memory_only_read_gets_no_shadow():
    fn, act = run(writes_const, (np.ones(3), np.ones(3)), [False, True])
    assert act.is_active(param(fn, "y"))
    assert not act.is_active(param(fn, "x"))
    assert not act.is_active(result(fn, "getitem", base="x"))       # x[1]
    assert act.shadow_params == [1]


def pure(x):
    return np.sum(np.sin(x))


def test_writes_memory_only_when_something_is_stored():
    assert not run(pure, (np.ones(3),), [True])[1].writes_memory
    assert run(writes_const, (np.ones(3), np.ones(3)), [True, False])[1].writes_memory


def dead_end(x, a):
    u = a * a             # varied, but its derivative reaches neither the return nor memory
    x[0] = 1.0
    return np.sum(x) + (u > 1.0)


def test_a_varied_value_that_reaches_nothing_is_not_active():
    """The backward ("useful") half: `u` depends on active `a`, but only through a comparison
    (no derivative) does it reach the return."""
    fn, act = run(dead_end, (np.ones(3), 2.0), [True, True])
    u = result(fn, "prim", "mul")
    assert u.id in act.active                                       # the forward half marks it
    assert not act.is_active(u)                                     # the backward half drops it
    assert act.is_active(result(fn, "prim", "numpy.sum"))


def test_without_a_seeded_return_only_memory_makes_values_useful():
    """An array is active by its memory; a float only when its derivative is wanted."""
    fn, act = run(pure, (np.ones(3),), [True], seed_return=False)
    assert act.is_active(result(fn, "prim", "numpy.sin"))           # fresh memory holding active data
    assert not act.is_active(result(fn, "prim", "numpy.sum"))       # the unseeded return
    fn, act = run(pure, (np.ones(3),), [True], seed_return=True)
    assert act.is_active(result(fn, "prim", "numpy.sum"))


def floors(x, a):
    q = a // 1.0          # floor division: no derivative by rule
    return np.sum(x) * q


def test_a_non_differentiable_rule_gives_an_inactive_result():
    fn, act = run(floors, (np.ones(3), 2.5), [True, True])
    assert not act.is_active(result(fn, "prim", "floordiv"))
    assert act.is_active(result(fn, "prim", "numpy.sum"))


def views(x, y):
    v = x[1:]
    v[0] = y[0] * 2.0
    return np.sum(x)


def test_a_view_shares_its_base_memory():
    """Writing active data into a view of `x` makes `x` active memory; the view's roots are `x`'s."""
    fn, act = run(views, (np.ones(4), np.ones(2)), [False, True])
    view = result(fn, "getitem", base="x")
    assert act.roots[view.id] == act.roots[param(fn, "x").id]
    assert act.is_active(param(fn, "x")) and act.is_active(view)
    assert act.shadow_params == [0, 1]


def gathers(x, idx, y):
    z = x[idx]
    z[0] = y[0]
    return np.sum(z) + np.sum(x)


def test_an_advanced_index_is_a_copy_with_memory_of_its_own():
    """`x[idx]` is fresh memory: a write into it does not make Const `x` active."""
    fn, act = run(gathers, (np.ones(4), np.array([0, 2]), np.ones(2)), [False, False, True])
    z = result(fn, "getitem", base="x")
    assert act.roots[z.id] != act.roots[param(fn, "x").id]
    assert act.is_active(z)
    assert not act.is_active(param(fn, "x"))
    assert act.shadow_params == [2]


def out_call(x, y):
    np.sin(x, out=y)
    return np.sum(y)


def test_an_out_call_makes_its_output_active_memory():
    fn, act = run(out_call, (np.ones(3), np.ones(3)), [True, False])
    assert act.is_active(param(fn, "y"))
    assert act.shadow_params == [0, 1]
    fn, act = run(out_call, (np.ones(3), np.ones(3)), [False, False])
    assert not act.is_active(param(fn, "y")) and act.shadow_params == []


def through_alias(x, y, a):
    x[0] = a
    return np.sum(y)


def test_parameters_in_one_alias_class_share_activity():
    """`x` and `y` may be one array at run time: active data written into `x` reaches `y`."""
    fn, act = run(through_alias, (np.ones(3), np.ones(3), 2.0), [False, False, True], aliases=[0, 1, 2])
    assert act.is_active(param(fn, "x")) and not act.is_active(param(fn, "y"))
    assert not act.is_active(result(fn, "prim", "numpy.sum"))
    fn, act = run(through_alias, (np.ones(3), np.ones(3), 2.0), [False, False, True], aliases=[0, 0, 2])
    assert act.is_active(param(fn, "y"))
    assert act.is_active(result(fn, "prim", "numpy.sum"))
    assert act.shadow_params == [0, 1]


def allocates(x, n):
    buf = np.zeros(n)
    other = np.zeros(n)
    buf[0] = x[0]
    return np.sum(buf) + np.sum(other)


def test_an_allocation_is_active_only_when_active_data_is_stored_in_it():
    fn, act = run(allocates, (np.ones(3), 3), [True, False])
    buf, other = (r for r in (op.results[0] for op in ops(fn, "prim", "numpy.zeros")))
    assert act.roots[buf.id] != act.roots[other.id]
    assert act.is_active(buf)
    assert not act.is_active(other)


def carried(x, n):
    s = 0.0
    c = 1.0
    for i in range(n):
        s = s + x[i]
        c = c * 2.0
    return s * c


def test_a_loop_carry_is_active_when_active_data_flows_around_the_loop():
    fn, act = run(carried, (np.ones(3), 3), [True, False])
    (loop,) = ops(fn, "for")
    out = carries(loop)
    assert act.is_active(out["s"])
    assert not act.is_active(out["c"])                              # only ever a constant times 2


def late_carry(x, n):
    s = 0.0
    t = 0.0
    for _ in range(n):
        s = s + t         # t becomes active only in a later iteration
        t = x[0]
    return s


def test_activity_reaches_a_fixpoint_around_loops():
    fn, act = run(late_carry, (np.ones(3), 3), [True, False])
    (loop,) = ops(fn, "for")
    out = carries(loop)
    assert act.is_active(out["s"])       # active from the second iteration on
    assert not act.is_active(out["t"])   # varied, but never used after the loop


def branches(x, a, flag):
    if flag:
        r = a * 2.0
    else:
        r = 1.0
    return np.sum(x) + r


def test_an_if_result_is_active_when_one_branch_yields_an_active_value():
    fn, act = run(branches, (np.ones(2), 2.0, True), [False, True, False])
    (branch,) = ops(fn, "if")
    assert act.is_active(branch.results[0])
    fn, act = run(branches, (np.ones(2), 2.0, True), [True, False, False])
    (branch,) = ops(fn, "if")
    assert not act.is_active(branch.results[0])
