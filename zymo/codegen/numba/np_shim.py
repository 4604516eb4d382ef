"""NumPy as Numba-compiled derivative code sees it (imported there as `np`).

Contract: every attribute is NumPy's own, except the few functions generated code
calls in ways Numba does not type, which are wrapped here with the same Python
behaviour and a Numba implementation registered with `numba.extending.overload`:
- ufuncs called with `out=` (Numba only takes `out` positionally) return `out`;
  transcendental ones (`vecmath.FUNCS`) of float64 or float32 numbers call the C library's
  function with libmvec's vector versions named (`vecmath`), and of such arrays run as
  `elementwise`'s loops, which call it too;
- `matmul` (absent from Numba) with its 1-d promotion rules and `out=` (a view too); `dot` with
  non-contiguous operands copied to contiguous ones first (Numba's BLAS path);
- `ndim`, `size` of scalars and arrays; `may_share_memory` by address ranges; `reshape`
  of arrays that are not C-contiguous (Numba reshapes those only): NumPy's view where there
  is one, else a copy;
- reductions with `keepdims=` and `max`/`min` along an axis; `var`/`std`/`prod` along
  constant axes and `max`/`min` over several axes, by rows (`_Rows`, any rank);
- `flip`, `roll`, `trace` with the `axis`/`axis1`/`axis2` arguments generated code passes
  (1-d and 2-d arrays; Numba's own take no axis); `diff` with an axis (1-d, 2-d) and
  `cross` with its default axes written out; `rollaxis` (a transpose, constant axes); `pad`
  (constant, edge, wrap, reflect, symmetric; 1-d, 2-d; constant of any rank) and `gradient` (1-d, 2-d along an axis),
  which Numba lacks; `einsum` only where it is a view of one operand (`twins.arrays`);
- `linalg`: `numpy.linalg` with `norm(A, 'fro')` of a matrix computed (`np_linalg.py`).
The same generated source runs unchanged under Python (these wrappers call NumPy)
and under Numba. Importing this module imports Numba, and swaps in `compile_costs`'s cheaper
implementations of some of Numba's own.
"""
from __future__ import annotations

import numpy as _np
from numba import types as _t
from numba.core.errors import TypingError as _TypingError
from numba.extending import intrinsic as _intrinsic
from numba.extending import overload as _overload
from numba.extending import register_jitable as _jitable

from . import compile_costs as _compile_costs
from . import np_linalg as linalg  # noqa: F401  (`np.linalg` of compiled code: `np_linalg.py`)

_compile_costs.install()  # Numba's implementations that cost seconds of compile for nothing (`compile_costs.py`)


def __getattr__(name: str):
    return getattr(_np, name)


def _none(t) -> bool:
    return t is None or isinstance(t, (_t.NoneType, _t.Omitted))


def _literal(t, what: str):
    """The compile-time value of an argument Numba typed as a literal (axis, keepdims)."""
    if not isinstance(t, _t.Type):
        return t  # an omitted argument: Numba passes the Python default
    if isinstance(t, _t.Omitted):
        return t.value
    if isinstance(t, _t.NoneType):
        return None
    if isinstance(t, _t.Literal):
        return t.literal_value
    if isinstance(t, _t.BaseTuple) and all(isinstance(e, _t.Literal) for e in t):
        return tuple(e.literal_value for e in t)
    raise _TypingError(f"zymo's Numba backend needs a constant {what}")


# -- ufuncs with out= ------------------------------------------------------------------


def _unaliased(x, out):
    return x


@_intrinsic
def _addr(typingctx, a):
    """The address of array `a`'s first element, as an integer. Unlike `a.ctypes.data` it
    holds no reference to `a`, so Numba keeps no reference count for it (a reference count
    costs more than the test it serves)."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.ptrtoint(ary.data, context.get_value_type(_t.intp))
    return _t.intp(a), codegen


@_overload(_unaliased)
def _ov_unaliased(x, out):
    """`x`, or a copy of it when it overlaps `out` other than element for element (NumPy
    buffers such inputs; Numba's ufuncs with `out` read them while writing). C-ordered arrays
    are compared by address ranges, others by `may_share_memory`."""
    if not (isinstance(x, _t.Array) and isinstance(out, _t.Array)):
        return lambda x, out: x
    if x.layout == "C" and out.layout == "C":
        def impl_c(x, out):
            px, po = _addr(x), _addr(out)
            if px == po and x.shape == out.shape:
                return x
            if x.size == 0 or out.size == 0 or px + x.nbytes <= po or po + out.nbytes <= px:
                return x
            return _np.copy(x)
        return impl_c

    def impl(x, out):
        if x.ndim == out.ndim and _addr(x) == _addr(out) and x.strides == out.strides:
            return x
        if may_share_memory(x, out):
            return _np.copy(x)
        return x
    return impl


def _check_out(out, x, y=None):
    pass


@_overload(_check_out)
def _ov_check_out(out, x, y=None):
    """NumPy's rule for a ufunc's `out`: every array operand broadcasts to `out`'s shape
    unchanged (each of its axes, aligned from the right, is `out`'s or 1). Numba's own
    ufuncs with `out` do not check it and write past or beside `out` (a 2-d operand into a
    1-d `out`), so the shim checks before calling them: ValueError as NumPy's."""
    xs = [t for t in (x, y) if isinstance(t, _t.Array)]
    if any(t.ndim > out.ndim for t in xs):
        def impl_rank(out, x, y=None):
            raise ValueError("non-broadcastable output operand: an operand has more dimensions than out")
        return impl_rank
    n = out.ndim

    def fits(a, shape):
        k = n - a.ndim
        for i in range(a.ndim):
            if a.shape[i] != 1 and a.shape[i] != shape[k + i]:
                return False
        return True
    fits_j = _jitable(fits)
    if len(xs) == 0:
        return lambda out, x, y=None: None
    if isinstance(x, _t.Array) and isinstance(y, _t.Array):
        def impl2(out, x, y=None):
            if not (fits_j(x, out.shape) and fits_j(y, out.shape)):
                raise ValueError("non-broadcastable output operand: its shape is not the operands' broadcast shape")
        return impl2
    if isinstance(x, _t.Array):
        def impl_x(out, x, y=None):
            if not fits_j(x, out.shape):
                raise ValueError("non-broadcastable output operand: its shape is not the operands' broadcast shape")
        return impl_x

    def impl_y(out, x, y=None):
        if not fits_j(y, out.shape):
            raise ValueError("non-broadcastable output operand: its shape is not the operands' broadcast shape")
    return impl_y


def _float_of(ts) -> _t.Type | None:
    """The one float dtype (float64 or float32) of the numbers and arrays `ts`, else None."""
    dts = {t.dtype if isinstance(t, _t.Array) else t for t in ts}
    dt = dts.pop() if len(dts) == 1 else None
    return dt if dt in (_t.float64, _t.float32) else None


def _vector_math(name: str, n: int):
    """NumPy's `name` of `n` numbers of one float type by `vecmath.call` (libmvec's lanes in
    loops LLVM vectorizes), None where `vecmath` does not apply."""
    from . import vecmath

    if name not in vecmath.FUNCS or not vecmath.available():
        return None

    def typer(typingctx, *xs):
        if not vecmath.covers(name, xs):
            return None

        def codegen(context, builder, sig, args):
            return vecmath.call(context, builder, name, list(zip(args, sig.args)))[0]
        return xs[0](*xs), codegen
    if n == 1:
        return _intrinsic(lambda typingctx, x: typer(typingctx, x))
    return _intrinsic(lambda typingctx, x, y: typer(typingctx, x, y))


def _vector_loops(uf, xs, out) -> str | None:
    """The elementwise expression (`elementwise.py`) that computes `uf` of operands `xs` into
    `out` (None: a new array) with `vecmath`'s lanes, when those loops are `elementwise`'s fast
    case: one float dtype for every operand and `out`, an array among the operands, `out`
    writable and of a rank no lower than theirs, and a rank above 0 (0-d arrays are not
    `elementwise`'s: its `ew_out` would call this ufunc back). None otherwise."""
    from . import vecmath

    arrays = [x for x in xs if isinstance(x, _t.Array)]
    if not (uf.__name__ in vecmath.FUNCS and vecmath.available() and arrays
            and _float_of([*xs, *([] if _none(out) else [out])]) is not None
            and any(a.ndim > 0 for a in arrays)):
        return None
    if not _none(out) and not (isinstance(out, _t.Array) and out.mutable and all(out.ndim >= a.ndim for a in arrays)):
        return None
    return f"np.{uf.__name__}({', '.join(f'x{i}' for i in range(len(xs)))})"


def _wrap_ufunc(uf):
    fast = _vector_math(uf.__name__, uf.nin)
    if uf.nin == 1:
        def py(x, out=None):
            return uf(x, out=out)

        def ov(x, out=None):
            from . import vecmath
            from .elementwise import ew_new, ew_out

            expr = _vector_loops(uf, (x,), out)
            if fast is not None and not isinstance(x, _t.Array) and _none(out) and vecmath.covers(uf.__name__, (x,)):
                return lambda x, out=None: fast(x)
            if expr is not None and _none(out):
                return lambda x, out=None: ew_new(expr, (x,))
            if expr is not None:
                call = f"np.{uf.__name__}(x0, out=d)"

                def impl_loops(x, out=None):
                    ew_out(out, expr, (x,), call)
                    return out
                return impl_loops
            if _none(out):
                return lambda x, out=None: uf(x)

            def impl(x, out=None):
                _check_out(out, x)
                uf(_unaliased(x, out), out)
                return out
            return impl
    else:
        def py(x, y, out=None):
            return uf(x, y, out=out)

        def ov(x, y, out=None):
            from . import vecmath
            from .elementwise import ew_new, ew_out

            expr = _vector_loops(uf, (x, y), out)
            if (fast is not None and _none(out) and not isinstance(x, _t.Array) and not isinstance(y, _t.Array)
                    and vecmath.covers(uf.__name__, (x, y))):
                return lambda x, y, out=None: fast(x, y)
            if expr is not None and _none(out):
                return lambda x, y, out=None: ew_new(expr, (x, y))
            if expr is not None:
                call = f"np.{uf.__name__}(x0, x1, out=d)"

                def impl_loops(x, y, out=None):
                    ew_out(out, expr, (x, y), call)
                    return out
                return impl_loops
            if _none(out):
                return lambda x, y, out=None: uf(x, y)

            def impl(x, y, out=None):
                _check_out(out, x, y)
                uf(_unaliased(x, out), _unaliased(y, out), out)
                return out
            return impl
    py.__name__ = py.__qualname__ = uf.__name__
    _overload(py)(ov)
    return py


for _name in ("sin", "cos", "tan", "exp", "log", "sqrt", "tanh", "absolute", "negative", "square",
              "add", "subtract", "multiply", "divide", "power",
              # issue 7's ufuncs (Numba types each where it supports the ufunc)
              "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "exp2", "expm1",
              "log2", "log10", "log1p", "cbrt", "reciprocal", "fabs", "positive", "deg2rad", "rad2deg",
              "arctan2", "hypot", "maximum", "minimum", "fmax", "fmin", "logaddexp", "logaddexp2", "copysign",
              "fmod", "remainder", "float_power",
              # the other ufuncs with rules that Numba compiles (`out=` would fail to lower)
              "degrees", "radians", "sign", "floor", "ceil", "trunc", "rint", "spacing", "conjugate",
              "isfinite", "isnan", "isinf", "signbit", "floor_divide", "ldexp", "nextafter",
              "greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
              "logical_and", "logical_or", "logical_xor", "logical_not",
              "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift", "gcd", "lcm"):
    globals()[_name] = _wrap_ufunc(getattr(_np, _name))
abs = absolute  # noqa: F821  (np.abs is np.absolute; defined by the loop above)
true_divide = divide  # noqa: F821


def clip(a, a_min, a_max, out=None):
    return _np.clip(a, a_min, a_max, out=out)


@_overload(clip)
def _ov_clip(a, a_min, a_max, out=None):
    """`minimum(maximum(a, a_min), a_max)`, NumPy's definition: Numba's own `np.clip` returns
    `a`'s shape even when the bounds broadcast it to a larger one."""
    lo, hi = not _none(a_min), not _none(a_max)
    if lo and hi:
        f = _jitable(lambda a, a_min, a_max: _np.minimum(_np.maximum(a, a_min), a_max))
    elif lo:
        f = _jitable(lambda a, a_min, a_max: _np.maximum(a, a_min))
    elif hi:
        f = _jitable(lambda a, a_min, a_max: _np.minimum(a, a_max))
    else:
        raise _TypingError("np.clip needs a_min or a_max")
    if _none(out):
        return lambda a, a_min, a_max, out=None: f(a, a_min, a_max)

    def impl(a, a_min, a_max, out=None):
        out[...] = f(a, a_min, a_max)
        return out
    return impl


# -- products --------------------------------------------------------------------------


def _contig(a):
    return a


@_overload(_contig)
def _ov_contig(a):
    if isinstance(a, _t.Array) and a.layout not in ("C", "F"):
        return lambda a: _np.ascontiguousarray(a)
    return lambda a: a


def matmul(a, b, out=None):
    return _np.matmul(a, b, out=out)


@_overload(matmul)
def _ov_matmul(a, b, out=None):
    if not (isinstance(a, _t.Array) and isinstance(b, _t.Array)) or a.ndim > 2 or b.ndim > 2:
        raise _TypingError("zymo's Numba backend supports np.matmul of 1-d and 2-d arrays")
    if _none(out):
        return lambda a, b, out=None: _np.dot(_contig(a), _contig(b))
    if not isinstance(out, _t.Array) or out.ndim != max(a.ndim + b.ndim - 2, 0) or out.ndim == 0:
        raise _TypingError("np.matmul: out= must be an array of the product's rank")
    direct = out.layout == "C" and out.dtype == a.dtype == b.dtype

    def impl(a, b, out=None):
        if direct and not (may_share_memory(out, a) or may_share_memory(out, b)):
            _np.dot(_contig(a), _contig(b), out)
            return out
        # a view (Numba's BLAS call writes C-ordered arrays of the operands' dtype only), or an
        # out overlapping an operand (NumPy computes the product first): a product, then stored
        r = _np.dot(_contig(a), _contig(b))
        if r.shape != out.shape:
            raise ValueError("matmul: Output operand has a mismatch in its core dimension")
        out[...] = r
        return out
    return impl


def dot(a, b, out=None):
    return _np.dot(a, b, out=out)


@_overload(dot)
def _ov_dot(a, b, out=None):
    if not (isinstance(a, _t.Array) and isinstance(b, _t.Array)):
        return lambda a, b, out=None: a * b
    if _none(out):
        return lambda a, b, out=None: _np.dot(_contig(a), _contig(b))

    def impl(a, b, out=None):
        if not (may_share_memory(out, a) or may_share_memory(out, b)):
            _np.dot(_contig(a), _contig(b), out)
            return out
        # `out` overlapping an operand (`np.dot(A, B, out=B)`): NumPy computes the product first,
        # Numba's BLAS call would write into what it reads (helper 77: zeros)
        r = _np.dot(_contig(a), _contig(b))
        if r.shape != out.shape:
            raise ValueError("output array is not acceptable (must have the right datatype, number of dimensions, "
                             "and be a C-Array)")
        out[...] = r
        return out
    return impl


# -- shapes and memory ---------------------------------------------------------------


def reshape(a, newshape, order="C"):
    return _np.reshape(a, newshape, order=order)


@_jitable
def _nocopy_strides(oshape, ostrides, nshape, itemsize):
    """NumPy's reshape without a copy (`_attempt_nocopy_reshape`, C order): the strides of
    the view of shape `nshape` on an array of shape `oshape` and strides `ostrides`, and
    whether there is one (each group of old axes that makes up a group of new ones must be
    contiguous, in C order, within itself)."""
    olddims = _np.empty(len(oshape), _np.intp)  # arrays, not lists: a comprehension with a
    oldstrides = _np.empty(len(oshape), _np.intp)  # condition took Numba seconds to compile
    oldnd = 0
    for k in range(len(oshape)):
        if oshape[k] != 1:
            olddims[oldnd], oldstrides[oldnd] = oshape[k], ostrides[k]
            oldnd += 1
    newnd = len(nshape)
    newstrides = _np.zeros(newnd, _np.intp)
    ni, oi, nj, oj = 0, 0, 1, 1
    while ni < newnd and oi < oldnd:
        np_, op = nshape[ni], olddims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= nshape[nj]
                nj += 1
            else:
                op *= olddims[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]:
                return False, newstrides
        newstrides[nj - 1] = oldstrides[oj - 1]
        for nk in range(nj - 1, ni, -1):
            newstrides[nk - 1] = newstrides[nk] * nshape[nk]
        ni, oi = nj, oj
        nj += 1
        oj += 1
    last = newstrides[ni - 1] if ni >= 1 else itemsize
    for nk in range(ni, newnd):
        newstrides[nk] = last
    return True, newstrides


@_overload(reshape)
def _ov_reshape(a, newshape, order="C"):
    """`np.reshape` with NumPy's semantics: Numba's own reshapes a C-contiguous array only (a
    `NotImplementedError` at run time for `a.T.reshape(-1)`). Any other array becomes the view
    NumPy makes where one exists (`_nocopy_strides`), else a contiguous copy."""
    from numba.np.unsafe.ndarray import to_fixed_tuple

    if not (order == "C" or _none(order) or isinstance(order, _t.StringLiteral) and order.literal_value == "C"
            or isinstance(order, _t.UnicodeType)):
        raise _TypingError("zymo's Numba backend reshapes in C order only")
    if not isinstance(a, _t.Array) or a.layout == "C":
        return lambda a, newshape, order="C": _np.reshape(a, newshape)
    if isinstance(newshape, _t.Integer):
        n = 1
    elif isinstance(newshape, _t.UniTuple) and isinstance(newshape.dtype, _t.Integer):
        n = len(newshape)
    else:
        raise _TypingError("zymo's Numba backend reshapes to an int or a tuple of ints")

    def impl(a, newshape, order="C"):
        if order != "C":
            raise ValueError("zymo's Numba backend reshapes in C order only")
        want = _np.asarray(newshape).reshape(n).astype(_np.intp)
        known, free = 1, -1
        for k in range(n):
            if want[k] == -1 and free < 0:
                free = k
            elif want[k] < 0:
                raise ValueError("can only specify one unknown dimension")
            else:
                known *= want[k]
        if free >= 0:
            if known == 0 or a.size % known != 0:
                raise ValueError("cannot reshape array into the shape asked for")
            want[free] = a.size // known
        elif known != a.size:
            raise ValueError("cannot reshape array into the shape asked for")
        shape = to_fixed_tuple(want, n)
        if a.size > 0:
            ok, strides = _nocopy_strides(a.shape, a.strides, want, a.itemsize)
            if ok:
                return _np.lib.stride_tricks.as_strided(a, shape, to_fixed_tuple(strides, n))
        return _np.ascontiguousarray(a).reshape(shape)
    return impl


def ndim(x):
    return _np.ndim(x)


@_overload(ndim)
def _ov_ndim(x):
    n = x.ndim if isinstance(x, _t.Array) else 0
    return lambda x: n


def size(x):
    return _np.size(x)


@_overload(size)
def _ov_size(x):
    if isinstance(x, _t.Array):
        return lambda x: x.size
    return lambda x: 1


def may_share_memory(a, b):
    return _np.may_share_memory(a, b)


@_jitable
def _extent(a):
    lo = a.ctypes.data
    hi = lo
    for d in range(a.ndim):
        span = (a.shape[d] - 1) * a.strides[d]
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + a.itemsize


@_overload(may_share_memory)
def _ov_msm(a, b):
    if not (isinstance(a, _t.Array) and isinstance(b, _t.Array)):
        return lambda a, b: False

    def impl(a, b):
        if a.size == 0 or b.size == 0:
            return False
        alo, ahi = _extent(a)
        blo, bhi = _extent(b)
        return alo < bhi and blo < ahi
    return impl


# -- reductions ------------------------------------------------------------------------


_ROWS: dict = {}


def _extreme(name, x):
    """The max or min of all of `x`, for 1-d and 2-d arrays of real numbers (else None: Numba's
    own): `inline.ew_max`/`ew_min`, a loop (the first of equal elements, NaN as soon as
    one is met, as Numba's), row by row for 2-d arrays. Numba's iterates with `np.nditer` and
    costs about half a second of compile per signature."""
    if name not in ("max", "min", "amax", "amin") or x.ndim not in (1, 2) or not isinstance(
            x.dtype, (_t.Integer, _t.Float)):
        return None
    from .inline import ew_max, ew_min

    larger = name in ("max", "amax")
    one = ew_max if larger else ew_min
    if x.ndim == 1:
        return one
    if larger not in _ROWS:
        empty = f"zero-size array to reduction operation {'maximum' if larger else 'minimum'} which has no identity"

        @_jitable
        def rows(x):
            if x.shape[0] == 0 or x.shape[1] == 0:
                raise ValueError(empty)
            m = one(x[0])
            for i in range(1, x.shape[0]):
                if m != m:
                    return m
                v = one(x[i])
                if v != v or ((v > m) if larger else (v < m)):
                    m = v
            return m
        _ROWS[larger] = rows
    return _ROWS[larger]


def _reduction(np_fn, name):
    def py(x, axis=None, keepdims=False):
        return np_fn(x, axis=axis, keepdims=keepdims)

    def ov(x, axis=None, keepdims=False):
        ax, keep = _literal(axis, "axis"), bool(_literal(keepdims, "keepdims"))
        if not isinstance(x, _t.Array):
            return lambda x, axis=None, keepdims=False: x
        if ax is None:
            whole = _extreme(name, x) or np_fn
            if keep:
                shape = (1,) * x.ndim
                return lambda x, axis=None, keepdims=False: _np.full(shape, whole(x))
            return lambda x, axis=None, keepdims=False: whole(x)
        if isinstance(ax, tuple) and all(isinstance(k, int) for k in ax):
            return _over_axes(np_fn, name, x, ax, keep)
        if not isinstance(ax, int):
            raise _TypingError(f"zymo's Numba backend reduces over one axis at a time (np.{name})")
        a = ax % x.ndim
        if name == "sum":
            def red(x):
                return np_fn(x, axis=a)
        elif name == "mean":  # Numba's np.mean takes no axis: the sum along it, divided
            if isinstance(x.dtype, (_t.Integer, _t.Boolean)):  # NumPy adds ints as float64
                def red(x):
                    return _np.sum(x.astype(_np.float64), axis=a) / x.shape[a]
            else:
                def red(x):
                    return _np.sum(x, axis=a) / x.shape[a]
        elif x.ndim == 2:
            take = _np.maximum if name in ("max", "amax") else _np.minimum
            empty = f"zero-size array to reduction operation {take.__name__} which has no identity"

            def red(x):
                if x.shape[a] == 0:  # x[0] would read past the end (Numba checks no bounds)
                    raise ValueError(empty)
                y = x[0].copy() if a == 0 else x[:, 0].copy()
                for j in range(1, x.shape[a]):
                    y = take(y, x[j] if a == 0 else x[:, j])
                return y
        else:  # max, min of another rank: by rows
            if not -x.ndim <= ax < x.ndim:
                raise _TypingError(f"np.{name}: axis out of bounds for an array of dimension {x.ndim}")
            step = _by_rows(name, x, (a,), keep)
            return lambda x, axis=None, keepdims=False: step(x)
        red = _jitable(red)  # a closure Numba can call
        if keep and x.ndim == 1:  # red(x) is a number
            return lambda x, axis=None, keepdims=False: _np.full((1,), red(x))
        if keep:
            return lambda x, axis=None, keepdims=False: _np.expand_dims(red(x), a)
        return lambda x, axis=None, keepdims=False: red(x)

    py.__name__ = py.__qualname__ = name
    _overload(py, prefer_literal=True)(ov)
    return py


def _over_axes(np_fn, name, x, axes, keep):
    """The Numba implementation of `np.<name>(x, axis=axes, keepdims=keep)` for a tuple of
    literal axes: a sum (or mean) over one axis after the other, from the last (the earlier
    axes keep their numbers); all axes of the array, a whole reduction. Sums add in another
    order than NumPy's, as Numba's own sums along an axis do."""
    norm = sorted({k % x.ndim for k in axes}, reverse=True)
    if len(norm) != len(axes):
        raise _TypingError("duplicate value in 'axis'")
    if len(norm) == x.ndim:
        whole = _extreme(name, x) or np_fn
        if keep:
            shape = (1,) * x.ndim
            return lambda x, axis=None, keepdims=False: _np.full(shape, whole(x))
        return lambda x, axis=None, keepdims=False: whole(x)
    if name not in ("sum", "mean"):  # max, min: by rows
        step = _by_rows(name, x, tuple(sorted(norm)), keep)
        return lambda x, axis=None, keepdims=False: step(x)
    if name == "mean" and isinstance(x.dtype, (_t.Integer, _t.Boolean)):  # NumPy adds ints as float64
        step = _jitable(lambda y: y.astype(_np.float64))
    else:
        step = _jitable(lambda y: y)
    for a in norm:  # innermost first: the last axis reduced first
        step = _chain_sum(step, a)
    kept = tuple(sorted(norm))
    if name == "mean":
        inner = step

        def step_mean(y):
            n = 1
            for a in kept:
                n *= y.shape[a]
            return inner(y) / n
        step = _jitable(step_mean)
    if keep:
        for a in kept:  # first axis first: each goes back where it was
            step = _chain_expand(step, a)
    return lambda x, axis=None, keepdims=False: step(x)


def _chain_sum(before, a):
    return _jitable(lambda y: _np.sum(before(y), axis=a))


def _chain_expand(before, a):
    return _jitable(lambda y: _np.expand_dims(before(y), a))


# -- reductions by rows: any axes of any rank --------------------------------------------------
#
# A reduction over axes `axes` of an n-d array is a reduction of each row of a 2-d array: the
# kept axes first (in order), the reduced ones last, made contiguous (`_Rows.flat`); row `i` is
# the kept axes' element `i` in C order, so a reduced result raveled has the rows' order.


class _Rows:
    """Jitted shape functions for reducing the axes `axes` (sorted, non-negative) of arrays of
    rank `ndim`: `flat(x)` (rows, reduced elements), `rest(x)`/`kept(x)` the result's shape
    without and with the reduced axes (as 1), `back(r, x)` a 2-d `r` of `flat(x)`'s shape put
    back in `x`'s shape and axis order (C-ordered)."""

    _made: dict = {}

    def __new__(cls, ndim: int, axes: tuple):
        key = (ndim, axes)
        if key not in cls._made:
            cls._made[key] = self = super().__new__(cls)
            self._build(ndim, axes)
        return cls._made[key]

    def _build(self, ndim: int, axes: tuple) -> None:
        rest = [d for d in range(ndim) if d not in axes]
        perm = rest + list(axes)

        def prod(ds):
            return " * ".join(f"x.shape[{d}]" for d in ds) or "1"

        def tup(items):
            return "(" + "".join(f"{s}, " for s in items) + ")"

        def radix(ds):  # the C-order position of the indices `i<d>` over the axes `ds`
            pos = "0"
            for d in ds:
                pos = f"i{d}" if pos == "0" else f"({pos}) * x.shape[{d}] + i{d}"
            return pos

        def loops(body):  # a nest over every element of `x`, in C order
            return [f"{'    ' * (d + 1)}for i{d} in range(x.shape[{d}]):" for d in range(ndim)] + \
                [f"{'    ' * (ndim + 1)}{body}"]
        if perm == list(range(ndim)):
            flat = [f"    return np.ascontiguousarray(x).reshape(({prod(rest)}, {prod(axes)}))"]
            back = ["    return r.reshape(x.shape)"]
        else:  # loops, not np.transpose: Numba's first transpose by axes in a process compiled for 7-10 s
            idx = ", ".join(f"i{d}" for d in range(ndim))
            flat = [f"    out = np.empty(({prod(rest)}, {prod(axes)}), x.dtype)",
                    *loops(f"out[{radix(rest)}, {radix(axes)}] = x[{idx}]"), "    return out"]
            back = ["    out = np.empty(x.shape, r.dtype)",
                    *loops(f"out[{idx}] = r[{radix(rest)}, {radix(axes)}]"), "    return out"]
        src = "\n".join([
            "def flat(x):", *flat,
            "def rest(x):",
            f"    return {tup(f'x.shape[{d}]' for d in rest)}",
            "def kept(x):",
            f"    return {tup('1' if d in axes else f'x.shape[{d}]' for d in range(ndim))}",
            "def back(r, x):", *back, ""])
        ns = {"np": _np}
        exec(compile(src, f"<zymo rows {ndim} {axes}>", "exec"), ns)
        self.flat, self.rest, self.kept, self.back = (_jitable(ns[k]) for k in ("flat", "rest", "kept", "back"))
        self.whole = not rest  # every axis reduced: one row


def _axes_of(axis, x, what: str) -> tuple:
    """The literal `axis` of a reduction of array `x` as sorted non-negative axes (None: all)."""
    ax = _literal(axis, "axis")
    n = x.ndim
    if ax is None:
        return tuple(range(n))
    ks = (ax,) if isinstance(ax, int) else ax
    if not (isinstance(ks, tuple) and all(isinstance(k, int) for k in ks)):
        raise _TypingError(f"zymo's Numba backend takes {what} over constant axes only")
    if any(not -n <= k < n for k in ks):
        raise _TypingError(f"{what}: axis out of bounds for an array of dimension {n}")
    norm = sorted({k % n for k in ks})
    if len(norm) != len(ks):
        raise _TypingError("duplicate value in 'axis'")
    return tuple(norm)


def _shaped(rows: _Rows, keep: bool):
    """A jitted `(r, x) -> the 1-d row results r in the reduction's shape` (a number for a
    reduction of every axis without keepdims)."""
    if keep:
        kept = rows.kept
        return _jitable(lambda r, x: r.reshape(kept(x)))
    if rows.whole:
        return _jitable(lambda r, x: r[0])
    rest = rows.rest
    return _jitable(lambda r, x: r.reshape(rest(x)))


def _real_float(dtype):
    """The float dtype of a variance, mean or norm of `dtype` (ints and bools: float64); None
    for types these loops do not take (complex)."""
    if isinstance(dtype, _t.Float):
        return dtype
    if isinstance(dtype, (_t.Integer, _t.Boolean)):
        return _t.float64
    return None


@_jitable
def _ieee_div(a, b):
    """`a / b` of two numbers as NumPy divides floats: inf or nan where `b` is 0."""
    if b != 0:
        return a / b
    if a != a or a == 0:
        return _np.nan
    return _np.inf if a > 0 else -_np.inf


def _rows_mean(dt):
    @_jitable
    def f(m):
        out = _np.empty(m.shape[0], dt)
        n = m.shape[1]
        for i in range(m.shape[0]):
            s = 0.0
            for j in range(n):
                s += m[i, j]
            out[i] = _ieee_div(s, n)
        return out
    return f


def _rows_var(dt, root: bool):
    @_jitable
    def f(m, ddof):
        out = _np.empty(m.shape[0], dt)
        n = m.shape[1]
        d = n - ddof
        if d < 0:  # (`max` here is this module's np.max)
            d = 0
        for i in range(m.shape[0]):
            s = 0.0
            for j in range(n):
                s += m[i, j]
            mu = _ieee_div(s, n)
            q = 0.0
            for j in range(n):
                e = m[i, j] - mu
                q += e * e
            v = _ieee_div(q, d)
            out[i] = _np.sqrt(v) if root else v
        return out
    return f


def _rows_prod(dt):
    @_jitable
    def f(m):
        out = _np.ones(m.shape[0], dt)
        for i in range(m.shape[0]):
            p = out[i]
            for j in range(m.shape[1]):
                p = p * m[i, j]
            out[i] = p
        return out
    return f


def _rows_extreme(larger: bool):
    empty = f"zero-size array to reduction operation {'maximum' if larger else 'minimum'} which has no identity"

    @_jitable
    def f(m):
        if m.shape[1] == 0:
            raise ValueError(empty)
        out = _np.empty(m.shape[0], m.dtype)
        for i in range(m.shape[0]):
            v = m[i, 0]
            for j in range(1, m.shape[1]):
                if v != v:
                    break
                w = m[i, j]
                if w != w or ((w > v) if larger else (w < v)):
                    v = w
            out[i] = v
        return out
    return f


def _by_rows(name, x, axes, keep):
    """The Numba implementation of `np.<name>(x, axis=axes, keepdims=keep)` (max, min, prod) by
    rows, for an array of real numbers (or bools) and sorted non-negative `axes`."""
    if not isinstance(x.dtype, (_t.Integer, _t.Float, _t.Boolean)):
        raise _TypingError(f"zymo's Numba backend takes np.{name} along axes of real arrays only")
    rows = _Rows(x.ndim, axes)
    if name in ("prod",):
        from numba.np.numpy_support import as_dtype

        red = _rows_prod(_np.prod(_np.ones(1, as_dtype(x.dtype))).dtype.type)
    else:
        red = _rows_extreme(name in ("max", "amax"))
    shaped = _shaped(rows, keep)
    flat = rows.flat
    return _jitable(lambda x: shaped(red(flat(x)), x))


def _var_like(root: bool):
    np_fn = _np.std if root else _np.var
    name = np_fn.__name__

    def py(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        return np_fn(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims)

    def ov(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        if not (_none(dtype) and _none(out)):
            raise _TypingError(f"zymo's Numba backend takes np.{name} without dtype= and out=")
        if not isinstance(a, _t.Array):
            return None  # Numba's own (its error)
        keep = bool(_literal(keepdims, "keepdims"))
        default_ddof = isinstance(ddof, _t.Omitted) or isinstance(ddof, _t.IntegerLiteral) and ddof.literal_value == 0
        if _literal(axis, "axis") is None and not keep and default_ddof:
            return lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False: np_fn(a)  # Numba's own
        dt = _real_float(a.dtype)
        if dt is None or a.ndim == 0:
            raise _TypingError(f"zymo's Numba backend takes np.{name} along axes of real arrays only")
        rows = _Rows(a.ndim, _axes_of(axis, a, f"np.{name}"))
        red, shaped = _rows_var(dt, root), _shaped(rows, keep)
        flat = rows.flat
        return lambda a, axis=None, dtype=None, out=None, ddof=0, keepdims=False: shaped(red(flat(a), ddof), a)

    py.__name__ = py.__qualname__ = name
    _overload(py, prefer_literal=True)(ov)
    return py


var = _var_like(False)
std = _var_like(True)


def prod(a, axis=None, dtype=None, out=None, keepdims=False):
    return _np.prod(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims)


@_overload(prod, prefer_literal=True)
def _ov_prod(a, axis=None, dtype=None, out=None, keepdims=False):
    if not (_none(dtype) and _none(out)):
        raise _TypingError("zymo's Numba backend takes np.prod without dtype= and out=")
    if not isinstance(a, _t.Array):
        return None
    keep = bool(_literal(keepdims, "keepdims"))
    if _literal(axis, "axis") is None and not keep:
        return lambda a, axis=None, dtype=None, out=None, keepdims=False: _np.prod(a)  # Numba's own
    if a.ndim == 0:
        raise _TypingError("zymo's Numba backend takes np.prod along axes of arrays of rank 1 or more")
    step = _by_rows("prod", a, _axes_of(axis, a, "np.prod"), keep)
    return lambda a, axis=None, dtype=None, out=None, keepdims=False: step(a)


def centered_rows(x, axes):
    """A jitted `x -> x minus its mean over the sorted axes `axes`` (the mean's axes kept)."""
    dt = _real_float(x.dtype)
    if dt is None:
        raise _TypingError("zymo's Numba backend differentiates np.var/np.std of real arrays only")
    rows = _Rows(x.ndim, axes)
    mean_rows = _rows_mean(dt)
    flat, kept = rows.flat, rows.kept
    return _jitable(lambda x: x - mean_rows(flat(x)).reshape(kept(x)))


sum = _reduction(_np.sum, "sum")
mean = _reduction(_np.mean, "mean")
max = _reduction(_np.max, "max")
min = _reduction(_np.min, "min")
amax = _reduction(_np.amax, "amax")
amin = _reduction(_np.amin, "amin")


def _ndim(x) -> int:
    return x.ndim if isinstance(x, _t.Array) else 0


def _axis(axis, x, what: str):
    """The literal axis (None, or an int made non-negative) of a call on a 1-d or 2-d `x`."""
    ax = _literal(axis, "axis")
    if ax is None:
        return None
    if not isinstance(ax, int) or _ndim(x) not in (1, 2):
        raise _TypingError(f"zymo's Numba backend differentiates {what} of 1-d and 2-d arrays along one axis")
    return ax % _ndim(x)


# -- shape functions with axis arguments ------------------------------------------------


def flip(m, axis=None):
    return _np.flip(m, axis)


@_overload(flip, prefer_literal=True)
def _ov_flip(m, axis=None):
    ax = _axis(axis, m, "np.flip")
    if ax is None and _ndim(m) == 2:
        return lambda m, axis=None: m[::-1, ::-1]
    if ax is None and _ndim(m) == 1 or ax == 0:
        return lambda m, axis=None: m[::-1]
    if ax == 1:
        return lambda m, axis=None: m[:, ::-1]
    raise _TypingError("zymo's Numba backend flips 1-d arrays, or 2-d arrays along one axis")


def roll(a, shift, axis=None):
    return _np.roll(a, shift, axis)


@_overload(roll, prefer_literal=True)
def _ov_roll(a, shift, axis=None):
    if _literal(axis, "axis") is not None or not isinstance(shift, _t.Integer):
        raise _TypingError("zymo's Numba backend rolls the flattened array by an int (no axis)")
    return lambda a, shift, axis=None: _np.roll(a, shift)


def trace(a, offset=0, axis1=0, axis2=1):
    return _np.trace(a, offset, axis1, axis2)


@_overload(trace, prefer_literal=True)
def _ov_trace(a, offset=0, axis1=0, axis2=1):
    if _ndim(a) != 2 or {_literal(axis1, "axis1") % 2, _literal(axis2, "axis2") % 2} != {0, 1}:
        raise _TypingError("zymo's Numba backend takes the trace of 2-d arrays")
    swap = _literal(axis1, "axis1") % 2 == 1

    def impl(a, offset=0, axis1=0, axis2=1):
        m = a.T if swap else a
        s = 0.0
        for i in range(m.shape[0]):
            j = i + offset
            if 0 <= j < m.shape[1]:
                s += m[i, j]
        return s
    return impl


def diff(a, n=1, axis=-1):
    return _np.diff(a, n, axis)


@_overload(diff, prefer_literal=True)
def _ov_diff(a, n=1, axis=-1):
    ax = _literal(axis, "axis")
    if _ndim(a) == 1 and ax in (0, -1) or _ndim(a) == 2 and ax in (1, -1):
        return lambda a, n=1, axis=-1: _np.diff(a, n)
    if _ndim(a) == 2 and ax in (0, -2):
        return lambda a, n=1, axis=-1: _np.ascontiguousarray(_np.diff(_np.ascontiguousarray(a.T), n).T)
    raise _TypingError("zymo's Numba backend takes np.diff of 1-d or 2-d arrays along a constant axis")


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    return _np.cross(a, b, axisa, axisb, axisc, axis)


@_overload(cross, prefer_literal=True)
def _ov_cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    axes = (_literal(axisa, "axisa"), _literal(axisb, "axisb"), _literal(axisc, "axisc"), _literal(axis, "axis"))
    if axes[:3] != (-1, -1, -1) or axes[3] not in (None, -1):
        raise _TypingError("zymo's Numba backend takes np.cross along the last axis only")
    return lambda a, b, axisa=-1, axisb=-1, axisc=-1, axis=None: _np.cross(a, b)


def rollaxis(a, axis, start=0):
    return _np.rollaxis(a, axis, start)


@_overload(rollaxis, prefer_literal=True)
def _ov_rollaxis(a, axis, start=0):
    from zymo.runtime import rollaxis_perm

    perm = rollaxis_perm(_ndim(a), _literal(axis, "axis"), _literal(start, "start"))
    return lambda a, axis, start=0: _np.transpose(a, perm)



# np.pad and np.gradient: Numba has neither; their overloads are registered by twins.arrays
# (imported with twins, as every Numba-compiled derivative is)
def pad(array, pad_width, mode="constant", constant_values=0):
    if mode == "constant":
        return _np.pad(array, pad_width, mode=mode, constant_values=constant_values)
    return _np.pad(array, pad_width, mode=mode)


def gradient(f, varargs=1.0, axis=None, edge_order=1):
    return _np.gradient(f, varargs, axis=axis, edge_order=edge_order)


def einsum(subscripts, a, b=None, c=None, d=None, e=None, f=None, optimize=False):
    """NumPy's einsum (up to six operands, as zymo's rule); under Numba only a view of one
    operand (`twins.arrays`)."""
    ops = [o for o in (a, b, c, d, e, f) if o is not None]
    return _np.einsum(subscripts, *ops, optimize=optimize)
