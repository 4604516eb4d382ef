"""analysis.types on its own: the IR type of an argument (`type_of_value`), of a primitive's
result (`infer_prim`, evaluated on example values, or `RESULT_TYPES`) and of an index
(`infer_getitem`), and the refusals, each a `ZymoTypeError` with a message that says why.
"""
import numpy as np
import pytest

from zymo.analysis.types import example, infer_getitem, infer_prim, type_of_result, type_of_value
from zymo.errors import ZymoTypeError
from zymo.ir import types as T
from zymo.ir.core import Value


@pytest.mark.parametrize("obj, expected", [
    (True, T.BOOL), (np.bool_(False), T.BOOL),          # bool before int: True is an int too
    (3, T.INT), (np.int32(3), T.INT), (np.uint8(3), T.INT),
    (2.0, T.F64), (np.float64(2.0), T.F64), (np.float32(2.0), T.F32),
    (1j, T.C128), (np.complex64(1j), T.C64),
    (None, T.NONE),
])
def test_scalars(obj, expected):
    assert type_of_value(obj) == expected


@pytest.mark.parametrize("arr, expected", [
    (np.ones(3), T.Array("float64", 1)),
    (np.ones((2, 3), np.float32), T.Array("float32", 2)),
    (np.ones((1, 1, 1), np.complex64), T.Array("complex64", 3)),
    (np.ones(3, np.int32), T.Array("int64", 1)),      # every integer dtype is one IR dtype
    (np.ones(3, np.uint16), T.Array("int64", 1)),
    (np.ones(2, bool), T.Array("bool", 1)),
    (np.zeros(()), T.Array("float64", 0)),                  # a 0-d array stays an array
])
def test_arrays(arr, expected):
    assert type_of_value(arr) == expected


def test_lists_of_one_type():
    assert type_of_value([1.0, 2.0]) == T.List(T.F64)
    assert type_of_value([np.ones(2), np.ones(3)]) == T.List(T.Array("float64", 1))


@pytest.mark.parametrize("obj, message", [
    (np.array([object()]), "dtype object"),
    (np.ones(2, np.float16), "dtype float16"),
    (np.clongdouble(1j), "complex numbers of dtype"),
    ([], "empty lists"),
    ([1.0, np.ones(2)], "different types"),
    ({"a": 1.0}, "type dict"),
])
def test_refusals(obj, message):
    with pytest.raises(ZymoTypeError, match=message):
        type_of_value(obj, "argument x")


def test_a_result_of_zero_dimensions_is_a_scalar_and_integer_results_are_int64():
    assert type_of_result(np.ones((), np.float32)) == T.F32
    assert type_of_result(np.ones((), np.complex128)) == T.C128
    assert type_of_result(np.arange(3, dtype=np.int16)) == T.Array("int64", 1)


@pytest.mark.parametrize("t", [T.F64, T.F32, T.C64, T.INT, T.BOOL, T.Array("float32", 2), T.List(T.F64)])
def test_examples_have_the_type_they_stand_for(t):
    assert type_of_value(example(t)) == t


def test_an_example_of_a_constant_is_the_constant():
    assert example(T.INT, 7) == 7


def arr(dtype="float64", ndim=1):
    return Value(T.Array(dtype, ndim))


def test_infer_prim_evaluates_the_primal_on_examples():
    assert infer_prim("numpy.sum", np.sum, [arr(ndim=2)], {}, None) == T.F64
    assert infer_prim("numpy.sum", np.sum, [arr(ndim=3)], {"axis": 0}, None) == T.Array("float64", 2)
    assert infer_prim("numpy.sin", np.sin, [arr("float32", 2)], {}, None) == T.Array("float32", 2)
    assert infer_prim("numpy.add", np.add, [arr("float32"), Value(T.F64)], {}, None) == T.Array("float32", 1)
    assert infer_prim("numpy.add", np.add, [arr("float32"), arr()], {}, None) == T.Array("float64", 1)
    assert infer_prim("numpy.linalg.slogdet", np.linalg.slogdet, [arr(ndim=2)], {}, None) == (T.F64, T.F64)


def test_a_constant_argument_is_used_as_it_is():
    """`np.sum(x, axis=(0, 1))` on a 3-d array: the constant axes decide the result's ndim."""
    axes = Value(T.Static((0, 1)), const=(0, 1))
    assert infer_prim("numpy.sum", np.sum, [arr(ndim=3)], {"axis": axes}, None) == T.Array("float64", 1)


def test_result_types_that_examples_cannot_give():
    """`reshape`'s ndim is the length of the shape (size-1 examples could not tell (1, 1) from 1)."""
    shape = (Value(T.INT), Value(T.INT), Value(T.INT))
    assert infer_prim("numpy.reshape", np.reshape, [arr(), shape], {}, None) == T.Array("float64", 3)


def test_a_call_that_fails_on_examples_is_refused():
    with pytest.raises(ZymoTypeError, match="cannot call numpy.matmul with arguments of these types"):
        infer_prim("numpy.matmul", np.matmul, [arr(ndim=0), arr(ndim=0)], {}, None)


def I():  # noqa: E743  (an integer index)
    return Value(T.INT)


@pytest.mark.parametrize("ndim, index, expected", [
    (2, (I(),), T.Array("float64", 1)),                       # A[i]: a row
    (2, (I(), I()), T.F64),                                  # A[i, j]: an element
    (2, (slice(None), I()), T.Array("float64", 1)),          # A[:, j]
    (1, (None, slice(None)), T.Array("float64", 2)),         # x[None, :]
    (2, (Ellipsis, None), T.Array("float64", 3)),            # A[..., None]
    (1, (I(), Ellipsis), T.Array("float64", 0)),             # x[i, ...]: a 0-d view, not a number
])
def test_basic_indexing(ndim, index, expected):
    assert infer_getitem(T.Array("float64", ndim), index, None) == expected


def test_an_element_of_a_float32_array_is_a_float32():
    assert infer_getitem(T.Array("float32", 1), (I(),), None) == T.F32


def test_advanced_indexing_types():
    idx = Value(T.Array("int64", 1))
    assert infer_getitem(T.Array("float64", 2), (idx,), None) == T.Array("float64", 2)
    mask = Value(T.Array("bool", 2))
    assert infer_getitem(T.Array("float64", 2), (mask,), None) == T.Array("float64", 1)


def test_a_list_is_indexed_by_one_integer():
    assert infer_getitem(T.List(T.F64), (I(),), None) == T.F64
    with pytest.raises(ZymoTypeError, match="a list can only be indexed by one integer"):
        infer_getitem(T.List(T.F64), (slice(None),), None)


@pytest.mark.parametrize("obj, index, message", [
    (T.Array("float64", 1), (I(), I()), "too many indices"),
    (T.Array("float64", 1), (Value(T.F64),), "indices must be integers"),
    (T.F64, (I(),), "cannot index a value of type"),
])
def test_index_refusals(obj, index, message):
    with pytest.raises(ZymoTypeError, match=message):
        infer_getitem(obj, index, None)
