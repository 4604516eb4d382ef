"""`codegen/hoist.py`: a kernel's trip counts computed once, at its top."""
from __future__ import annotations

import ast
import textwrap

import numpy as np

from zymo import runtime as _rt
from zymo.codegen.hoist import hoist_spans


def _hoisted(src: str) -> tuple[bool, str]:
    fn = ast.parse(textwrap.dedent(src)).body[0]
    assert isinstance(fn, ast.FunctionDef)
    changed = hoist_spans(fn)
    return changed, ast.unparse(fn)


def _run(src: str, *args):
    ns = {"_rt": _rt, "np": np}
    exec(src, ns)
    return ns["k"](*args)


def test_invariant_spans_computed_once_at_the_top_nested_ones_inner_first():
    src = """
    def k(a, n, m, k0):
        for i in range(1, n):
            p = k0 + (i - 1) * _rt.span(1, n) * _rt.span(0, _rt.span(0, m))
            a[p] = _rt.span(1, n)
        return a
    """
    changed, out = _hoisted(src)
    assert changed
    lines = out.splitlines()
    assert lines[1:4] == ["    _span_0 = _rt.span(1, n)", "    _span_1 = _rt.span(0, m)",
                          "    _span_2 = _rt.span(0, _span_1)"]
    assert "p = k0 + (i - 1) * _span_0 * _span_2" in out and "a[p] = _span_0" in out
    want = _run(textwrap.dedent(src), np.zeros(200), 5, 3, 7)
    got = _run(out, np.zeros(200), 5, 3, 7)
    assert np.array_equal(want, got) and np.any(got)


def test_loop_heads_and_spans_of_assigned_names_stay_where_they_are():
    src = """
    def k(a, n, m):
        for _r in range(_rt.span(1, n)):
            i = n - 1 - _r
            a[i] += _rt.span(0, m)
        m = m + 1
        return a
    """
    changed, out = _hoisted(src)
    assert not changed  # `m` is assigned in the kernel; the loop's head keeps `_rt.span(1, n)`
    assert "range(_rt.span(1, n))" in out and "a[i] += _rt.span(0, m)" in out


def test_new_names_are_fresh_and_a_kernel_without_spans_is_unchanged():
    src = """
    def k(a, n, _span_0):
        a[0] = _rt.span(0, n) + _span_0
        return a
    """
    changed, out = _hoisted(src)
    assert changed and "_span_1 = _rt.span(0, n)" in out and "a[0] = _span_1 + _span_0" in out
    assert _run(out, np.zeros(2), 4, 3)[0] == 7.0
    assert _hoisted("def k(a, n):\n    a[0] = n\n    return a\n") == (False, "def k(a, n):\n    a[0] = n\n    return a")
