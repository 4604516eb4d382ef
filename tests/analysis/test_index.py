"""The shared index of a Function (`analysis/index.py`): definitions, readers, loop nests,
and the analyses that read it instead of building their own."""
import numpy as np

import zymo
from zymo.analysis.activity import analyze
from zymo.analysis.bounds import NeverUnsigned, NonNegative
from zymo.analysis.index import Index
from zymo.analysis.overwrite import Overwrites
from zymo.analysis.shapes import FixedShapes
from zymo.ir.core import walk


def nest(A, x):
    s = 0.0
    for i in range(A.shape[0]):
        r = A[i]
        for j in range(x.shape[0]):
            s += r[j] * x[j]
        k = 0
        while k < 2:
            k += 1
    if s > 0.0:
        s = s * 2.0
    return s


def _ir():
    return zymo.ir(nest, np.ones((3, 2)), np.ones(2))


def _op(fn, kind, n=0):
    return [op for op in walk(fn.body) if op.kind == kind][n]


def test_definitions_and_depths():
    fn = _ir()
    ix = Index(fn)
    outer, inner, loop_w = _op(fn, "for"), _op(fn, "for", 1), _op(fn, "while")
    A, x = fn.params
    assert ix.def_block[A.id] is fn.body and ix.value_depth(A) == 0
    assert ix.values[A.id] is A and A not in ix.order  # parameters are not in `order`
    i, j = outer.regions[0].args[0], inner.regions[0].args[0]
    assert ix.loop_var[i.id] is outer and ix.loop_var[j.id] is inner
    assert ix.def_op[i.id] is outer and i.id not in ix.producer  # a loop index: its loop, not a result
    assert ix.value_depth(i) == 1 and ix.value_depth(j) == 2
    assert ix.depth[id(loop_w.regions[1])] == 2  # the while body, inside the outer for
    getrow = next(op for op in outer.regions[0].ops if op.kind == "getitem")
    assert ix.producer[getrow.result.id] is getrow and ix.block_of_op[id(getrow)] is outer.regions[0]
    results = [r for op in walk(fn.body) for r in op.results]  # program order
    assert [v for v in ix.order if v.id in ix.producer] == results


def test_readers_and_loop_nests():
    fn = _ir()
    ix = Index(fn)
    outer, inner, loop_w, branch = _op(fn, "for"), _op(fn, "for", 1), _op(fn, "while"), _op(fn, "if")
    x = fn.params[1]
    assert all(any(a is x for a in op.args) for op in ix.readers[x.id])
    assert ix.reader_count(x) == sum(a is x for op in walk(fn.body) for a in op.args)
    load = next(op for op in inner.regions[0].ops if op.kind == "getitem")
    assert ix.loops(load) == [inner, outer]  # innermost first
    assert ix.loop_of(inner.regions[0]) is inner and ix.loop_of(branch.regions[0]) is None
    assert ix.inside(inner.regions[0], outer) and not ix.inside(outer.regions[0], inner)
    assert ix.loop_of(loop_w.regions[0]) is loop_w and ix.parent[id(outer)] == (None, fn.body, fn.body.ops.index(outer))
    assert ix.block_owner[id(fn.body)] is None and ix.block_owner[id(branch.regions[1])] is branch


def test_analyses_share_one_index():
    fn = _ir()
    ix = Index(fn)
    act = analyze(fn, [True, True], [0, 1])
    ow = Overwrites(fn, act, ix)
    assert ow.parent is ix.parent and ow.block_owner is ix.block_owner
    assert FixedShapes(fn, ix).def_op is ix.producer
    assert NeverUnsigned(fn, ix).loop is ix.loop_var and NonNegative(fn, ix).def_op is ix.producer
    # the same answers with an index of their own
    alone = Overwrites(fn, act)
    for op in walk(fn.body):
        for v in op.args:
            assert ow.first_writer(op, v) is alone.first_writer(op, v)
    shapes, shapes_alone = FixedShapes(fn, ix), FixedShapes(fn)
    assert all(shapes.fixed(v) == shapes_alone.fixed(v) for v in ix.order)
