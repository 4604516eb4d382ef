"""The program as one tree through the "kernels" backend's passes (`codegen/tree.py`): its
comments held as statements and printed back, taken out and put back where they were, and the
tree passes (`blas_tree`, `lean_tree`, `outline_tree`) giving what their functions of text give."""
from __future__ import annotations

import ast

import numpy as np

import zymo
from zymo import Active, Duplicated, Reverse
from zymo.codegen.idioms import blas_nests, blas_tree
from zymo.codegen.loop_order import lean_loops, lean_tree
from zymo.codegen.outline import outline, outline_tree
from zymo.codegen.tree import parse, put_comments, source, take_comments
from zymo.transform.reverse.facts import MemoryFacts

PROGRAM = '''
def f(A, d, x, y, n, m):
    # forward sweep
    for i in range(n):
        for j in range(m):
            d[i] += A[i, j] * x[j]
    # adjoint sweep
    for j in range(m):
        y[j] = 2.0 * x[j]
    return d
'''
NDIMS = {"A": 2, "d": 1, "x": 1, "y": 1}


def _facts() -> MemoryFacts:
    names = tuple(NDIMS)
    return MemoryFacts({n: (k,) for k, n in enumerate(names)}, frozenset(names), dict(NDIMS))


def test_comments_are_statements_in_the_tree_and_comments_again_in_print():
    tree = parse(PROGRAM)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    assert ast.unparse(fn.body[0]) == "_zymo_comment_('forward sweep')"
    out = source(tree)
    assert "    # forward sweep\n" in out and "    # adjoint sweep\n" in out
    assert source(parse(out)) == out


def test_comments_taken_out_and_put_back_where_they_were():
    tree = parse(PROGRAM)
    before = source(tree)
    taken = take_comments(tree)
    assert len(taken) == 2 and "#" not in source(tree)
    put_comments(taken)
    assert source(tree) == before


def test_the_tree_passes_give_what_the_text_passes_give():
    tree = parse(PROGRAM)
    assert lean_tree(tree, _facts())
    assert source(tree) == lean_loops(PROGRAM, _facts())
    plain = ast.parse(PROGRAM)
    assert not blas_tree(plain, NDIMS, frozenset({"n", "m"})) and blas_nests(PROGRAM, NDIMS, frozenset()) == PROGRAM


def test_outline_tree_groups_loops_as_outline_does_whatever_the_comments():
    numbers = frozenset({"n", "m", "i", "j"})  # the loop indices: numbers
    text = outline(PROGRAM, NDIMS, numbers)
    tree = parse(PROGRAM)
    got = outline_tree(tree, NDIMS, numbers)
    assert got is not None and got.names == text.names == ["_kernel_0"]  # both loops, one kernel
    assert got.kernels == text.kernels and got.src == text.src


def test_outline_tree_leaves_a_program_without_loops_as_it_was():
    src = "def f(x):\n    # nothing to outline\n    y = x * 2.0\n    return y\n"
    tree = parse(src)
    assert outline_tree(tree, {"x": 1, "y": 1}, frozenset()) is None
    assert source(tree) == "def f(x):\n    # nothing to outline\n    y = x * 2.0\n    return y\n"


def test_kernels_backend_end_to_end_with_a_comment_between_loops():
    def f(A, x):
        n, m = A.shape
        d = np.zeros(n)
        for i in range(n):
            for j in range(m):
                d[i] += A[i, j] * x[j]
        return np.sum(d * d)

    rng = np.random.default_rng(3)
    A, x = rng.random((5, 4)), rng.random(4)
    grads = []
    for backend in (False, "kernels"):
        dA, dx = np.zeros_like(A), np.zeros_like(x)
        zymo.autodiff(Reverse, f, Active, Duplicated(A.copy(), dA), Duplicated(x.copy(), dx), numba=backend)
        grads.append((dA, dx))
    for a, b in zip(*grads):
        assert np.array_equal(a, b) and np.any(a != 0)
    d = A @ x
    np.testing.assert_allclose(grads[0][1], 2 * A.T @ d, rtol=1e-12)


def test_only_comment_tokens_at_statement_level_become_statements():
    src = ('def f(x):\n    y = g(x,\n    # a comment inside brackets\n          1)\n'
           '    s = """\n    # a line of a string\n"""\n    # a comment\n    return y\n')
    tree = parse(src)
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    notes = [ast.unparse(s) for s in fn.body if ast.unparse(s).startswith("_zymo_comment_")]
    assert notes == ["_zymo_comment_('a comment')"]
    assert "\n    # a line of a string\n" in ast.literal_eval(ast.unparse(fn.body[1].value))  # type: ignore


def test_comments_anywhere_are_taken_out_and_put_back():
    src = "class K:\n    # in a class\n    a = 1\n\ndef f(x):\n    # only\n    return x\n"
    tree = parse(src)
    before = source(tree)
    taken = take_comments(tree)
    assert "_zymo_comment_" not in ast.unparse(tree)
    put_comments(taken)
    assert source(tree) == before and "    # in a class\n" in before


def test_a_comment_that_would_end_a_block_is_dropped_not_moved():
    src = ("def f(x):\n    for i in range(3):\n        y = 1\n    # inside the loop, written at column 4\n"
           "        x = x + y\n    return x\n")
    tree = parse(src)
    assert ast.dump(tree) == ast.dump(ast.parse(src))
