"""Numba implementations that cost seconds of compile for nothing generated code needs.

Contract: `install()` (run once, when `np_shim` is imported) swaps each entry of `_CHEAPER`
into Numba's typing registry in place of Numba's own implementation. The replacement
computes the same thing and raises the same exception type with the same information;
only its message is formatted differently. It applies to every Numba function compiled
afterwards in the process, the user's own included. If Numba's internals are not as
expected (another version), nothing is swapped and compiles take their usual time.

- Assigning an array to a slice (`a[i:j] = b`, `a[:, k] = b`, ...) makes Numba compile its
  shape-mismatch error, which formats both shapes with `str` and `', '.join`: about 2 s of
  compile for each pair of ranks, once per process, paid by the first such statement in any
  program (measured with Numba 0.68, `NUMBA_OPT=1`). The replacement raises
  `ValueError(message, slice_shape, input_shape)`, the two shapes as tuples.
"""
from __future__ import annotations

from numba.core import types


def _shape_mismatch(src_shapes, index_shape):
    if isinstance(src_shapes, types.UniTuple) and isinstance(index_shape, types.UniTuple):

        def impl(src_shapes, index_shape):
            raise ValueError("cannot assign to a slice of one shape from an input of another (the slice's shape, "
                             "the input's)", index_shape, src_shapes)

        return impl
    return None


def _cheaper():
    from numba.np import arrayobj

    return [(getattr(arrayobj, "raise_with_shape_context", None), getattr(arrayobj, "ol_raise_with_shape_context_cpu",
                                                                          None), _shape_mismatch)]


_INSTALLED: list[str] = []


def install() -> list[str]:
    """Swap the cheaper implementations in (once per process); returns the names swapped."""
    if _INSTALLED:
        return _INSTALLED
    from numba.core.typing.templates import builtin_registry

    cheaper = {func: (theirs, ours) for func, theirs, ours in _cheaper() if func is not None and theirs is not None}
    for func, fn_type in builtin_registry.globals:  # what typing contexts install on their refresh
        if func not in cheaper:
            continue
        theirs, ours = cheaper[func]
        for template in getattr(fn_type, "templates", ()):
            if getattr(template, "_overload_func", None) is theirs:
                template._overload_func = staticmethod(ours)
                _INSTALLED.append(func.__name__)
    return _INSTALLED
