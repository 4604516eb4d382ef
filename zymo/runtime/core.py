"""The core runtime helpers: what most rules and the transforms call (as `_rt.<name>`).

Contract: small pure functions over NumPy values and Python scalars, written in
the subset Numba compiles (their compiled twins: `codegen/numba/twins/core.py`), each
doing one thing the rules or transforms need: sum an adjoint back to an operand's
shape, the adjoints of matrix products and reductions, trip counts of reversed loops,
tape buffers, shadow views. `USER` holds the user functions generated code calls.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import config

__all__ = [
    "USER", "unbroadcast", "as_tangent", "as_shape", "expand_reduced", "reduced_count", "matmul_vjp_a",
    "matmul_vjp_b", "dot_vjp_a", "dot_vjp_b", "zeros_list", "grow", "grow_stack", "reuse_buffer", "reuse_list",
    "tape_take", "tape_keep", "reuse_tape", "int_pow", "fdiv", "fpow", "span", "trip", "extreme_mask",
    "maybe_view_shadow",
    "reshape_shadow",
    "is_view", "check_bound",
    "check_shadow_view", "clip_inside", "prod_others", "centered", "cumsum_vjp", "cumprod_jvp", "cumprod_vjp",
    "norm_grad", "linspace_unit", "linspace_jvp", "linspace_vjp", "is_given", "as_dtype", "imag_copy", "sum_product",
    "fp_raises",
]

# user functions generated code calls: inactive functions and custom rules (rules/custom.py)
USER: list = []

def _error_state():
    """NumPy's error state as an object that is the same one while the state is unchanged (its
    context variable's value), or None where NumPy keeps it elsewhere."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar
    except ImportError:  # pragma: no cover - another NumPy's layout: `fp_raises` asks `np.geterr`
        return None
    return _extobj_contextvar


_RAISING = ("raise", "call", "log")  # "call" and "log" hand the error to user code, which may raise
_STATE = _error_state()
_QUIET = (_STATE.get() if _STATE is not None and not any(v in _RAISING for v in np.geterr().values())
          else None)
_QUIET_WARNS = "warn" in np.geterr().values()
_FILTERS: list = [None, -1, False]  # `warnings.filters` last read, its length then, and what it said


def _warnings_raise():
    """Whether a warnings filter may turn NumPy's `RuntimeWarning` into an error
    (`warnings.simplefilter("error")`, `pytest -W error`): read again when the list of filters
    is another one or has another length."""
    filters = warnings.filters
    if filters is not _FILTERS[0] or len(filters) != _FILTERS[1]:
        _FILTERS[:] = [filters, len(filters), any(f[0] == "error" and isinstance(f[2], type)
                                                  and issubclass(RuntimeWarning, f[2]) for f in filters)]
    return _FILTERS[2]


def fp_raises():
    """Whether arithmetic may raise by NumPy's error state: some error set to "raise", or to
    "call" or "log" a user's function or object (which may raise), or to "warn" under a warnings
    filter that makes the warning an error. A derivative computes a primal value nobody reads,
    which only that could make raise (`transform/reverse/dead.py`), only where this is True.
    The state zymo found at import, unchanged, is answered in one comparison (and a look at the
    warnings filters where it warns)."""
    if _QUIET is not None and _STATE.get() is _QUIET:
        return _QUIET_WARNS and _warnings_raise()
    state = np.geterr().values()
    return any(v in _RAISING for v in state) or ("warn" in state and _warnings_raise())


def unbroadcast(g, x):
    """Sum `g` (an adjoint of a broadcast result) back to the shape of operand `x`."""
    if type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape and g.ndim:
        return g  # the common case first: no broadcast (a third of the call's cost in loops)
    if np.ndim(x) == 0:
        return np.sum(g) if np.ndim(g) else g
    g = np.asarray(g)
    shape = np.shape(x)
    if g.shape == shape:
        return g
    if g.ndim == 0:
        return np.broadcast_to(g, shape)
    lead = g.ndim - len(shape)
    if lead > 0:
        g = g.sum(axis=tuple(range(lead)))
    elif lead < 0:
        # a store that drops leading length-1 dimensions (`out[0] = a`, `a` of shape (1, n)):
        # the adjoint is `a`'s, without them
        if any(n != 1 for n in shape[:-lead]):
            raise ValueError(f"zymo: an adjoint of shape {g.shape} does not broadcast to {shape}")
        g = g.reshape((1,) * -lead + g.shape)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def sum_product(a, b):
    """`np.sum(a * b)`: one dot product, without the product array, when `a` and `b` are
    float64 arrays of one shape (equal to rounding); otherwise exactly that expression."""
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape
            and a.dtype == np.float64 and b.dtype == np.float64):
        return np.vdot(a, b)
    return np.sum(a * b)


def as_tangent(t, y):
    """A fresh array with `y`'s shape and dtype holding the tangent `t` (broadcast)."""
    out = np.empty_like(y)
    out[...] = t
    return out


def as_shape(t, y):
    """`t` if it already has `y`'s shape and dtype (a fresh temporary), else a broadcast copy."""
    if type(t) is np.ndarray and type(y) is np.ndarray and t.shape == y.shape and t.dtype == y.dtype:
        return t  # the common case, without NumPy's dispatching helpers
    if isinstance(t, np.ndarray) and t.shape == np.shape(y) and t.dtype == np.result_type(y):
        return t
    return as_tangent(t, y)


def expand_reduced(g, x, axis, keepdims):
    """Broadcast the adjoint `g` of a reduction of `x` over `axis` back to `x`'s shape (a
    read-only view); for a number `x` (`np.sum(np.mean(a))`), a number, which an adjoint
    accumulates into by rebinding."""
    if axis is None and type(x) is np.ndarray and x.ndim:  # the common case first (a row's max in a loop)
        return _broadcast_number(np.asarray(g), x.shape)
    if np.ndim(x) == 0:
        return np.asarray(g)[()]
    if axis is None:
        return _broadcast_number(np.asarray(g), np.shape(x))
    if not keepdims:
        axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
        axes = tuple(a % np.ndim(x) for a in axes)
        g = np.expand_dims(g, axes)
    return np.broadcast_to(g, np.shape(x))


def _broadcast_number(a, shape):
    """`np.broadcast_to(a, shape)` (a read-only view) for an array `a` of one number, made
    directly as an array with zero strides over `a`'s memory: half of `broadcast_to`'s cost,
    which the adjoint of a reduction in a loop (`max` of a row) pays in every iteration."""
    if a.size != 1 or not a.flags.c_contiguous or a.dtype.kind not in "biufc":
        return np.broadcast_to(a, shape)
    view = np.ndarray(shape, a.dtype, a, 0, (0,) * len(shape))
    view.flags.writeable = False
    return view


def reduced_count(x, ans):
    """How many elements of `x` each element of the reduction `ans` averages."""
    return np.size(x) // max(np.size(ans), 1)


def matmul_vjp_a(g, a, b):
    """Adjoint of `a` in `a @ b`, by NumPy's matmul rules: a 1-d operand is a matrix with a
    length-1 axis put in front (`a`) or after (`b`), which the product then drops; stacks
    broadcast, and the adjoint is summed back to `a`'s shape (`unbroadcast`)."""
    nda, ndb = np.ndim(a), np.ndim(b)
    if ndb == 1:
        if nda == 1:
            return g * b
        return np.multiply.outer(g, b)  # g has a's shape less its last axis: no stack to sum
    if nda == 1:
        if ndb == 2:
            return b @ g
        # a (k,) against a stack b (..., k, m), g (..., m): sum over the stack too
        return np.tensordot(np.moveaxis(b, -2, 0), g, axes=np.ndim(g))
    return unbroadcast(g @ np.swapaxes(b, -1, -2), a)


def matmul_vjp_b(g, a, b):
    """Adjoint of `b` in `a @ b` (NumPy's matmul rules, as `matmul_vjp_a`)."""
    if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and b.ndim == 1:
        return a.T @ g  # a matrix times a vector, the common case first
    nda, ndb = np.ndim(a), np.ndim(b)
    if nda == 1:
        if ndb == 1:
            return g * a
        if ndb == 2:
            return np.multiply.outer(a, g)
        # b a stack (..., k, m), g (..., m): no stack to sum
        return np.asarray(a)[:, None] * np.asarray(g)[..., None, :]
    if ndb == 1:
        if nda == 2:
            return a.T @ g
        # a stack (..., n, k) times a vector, g (..., n): sum over the stack and the rows
        return np.tensordot(g, a, axes=np.ndim(g))
    return unbroadcast(np.swapaxes(a, -1, -2) @ g, b)


def dot_vjp_a(g, a, b):
    """Adjoint of `a` in `np.dot(a, b)` (a 0-d operand makes it a product)."""
    _dot_check(a, b)
    if np.ndim(a) == 0:
        return np.sum(g * b)
    if np.ndim(b) == 0:
        return g * b
    return matmul_vjp_a(g, a, b)


def dot_vjp_b(g, a, b):
    """Adjoint of `b` in `np.dot(a, b)`."""
    _dot_check(a, b)
    if np.ndim(b) == 0:
        return np.sum(g * a)
    if np.ndim(a) == 0:
        return g * a
    return matmul_vjp_b(g, a, b)


def _dot_check(a, b):
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise NotImplementedError("np.dot of arrays with more than 2 dimensions is not differentiable yet; "
                                  "use np.matmul")


def zeros_list(lst):
    """A zero adjoint of a list of arrays: one zero array per element."""
    return [np.zeros_like(a) for a in lst]


def grow(buf, need=0):
    """`buf` copied into a buffer at least twice as long and of at least `need` entries."""
    out = np.empty(max(2 * buf.shape[0] + 1, need), buf.dtype)
    out[: buf.shape[0]] = buf
    return out


def grow_stack(buf, row, need):
    """A stacked cache (`(entries, *row.shape)`) with room for at least `need` entries and
    twice the old ones, the old entries copied; its rows take `row`'s shape."""
    n = buf.shape[0]
    if n > 0 and buf.shape[1:] != row.shape:
        raise ValueError("zymo internal error: a stacked cache's rows changed shape")
    out = np.empty((max(2 * n + 1, need),) + row.shape, buf.dtype)
    if n > 0:
        out[:n] = buf
    return out


def reuse_buffer(tape, slot, size, dtype):
    """Slot `slot` of a tape passed back in, if it can hold `size` entries; else a new buffer."""
    if tape is not None:
        buf = tape[slot]  # None: a checkpointed loop that did not tape
        if buf is not None and buf.shape[0] >= size and (buf.dtype.type is dtype or buf.dtype == dtype):
            return buf
    return np.empty(max(size, 1), dtype)


def int_pow(a, b):
    """`a ** b` of two ints whose exponent the program cannot see is 0 or more, typed as an int
    (`transform.emit._int_power`). A negative `b` raises: Python's result is then a float,
    which the program would store and compute with as an int (a cache of ints truncates it;
    Numba's int power gives 0), a wrong number either way."""
    if b < 0:
        raise ValueError(_NEGATIVE_POWER)
    return a ** b


_NEGATIVE_POWER = ("zymo: an int raised to a negative int power is a float in Python, and this program typed the "
                   "power as an int (its exponent is not a constant); write float(a) ** b")


def tape_take(fn, dtypes):
    """The array caches the last finished call of reverse program `fn` kept (`tape_keep`), one
    per dtype of `dtypes`, taken from it so that no other call (another thread's, a re-entrant
    one) shares them; an empty buffer of the dtype for each it cannot give back. Their contents
    are stale, only their memory is reused, already mapped (a new buffer of a megabyte is faulted
    in page by page at every call: docs/decisions/0021). Each is one name's only reference, so a
    buffer too small for this call is freed when `reuse_tape` replaces it."""
    config.keep_tapes()  # a bad ZYMO_KEEP_TAPES raises here, before the call writes anything
    kept = fn.__dict__.pop("_zymo_tapes", None)
    if kept is not None and len(kept) == len(dtypes):
        for b, d in zip(kept, dtypes):
            if b.dtype.type is not d:
                break
        else:
            return kept
    return tuple([np.empty(0, d) for d in dtypes])


def reuse_tape(buf, size, dtype):
    """`buf` (a kept cache, `tape_take`) if it can hold `size` entries, else a new buffer."""
    if buf.shape[0] >= size:
        return buf
    return np.empty(max(size, 1), dtype)


def tape_keep(fn, caches):
    """Keep the array caches `caches` of a finished call of `fn` for its next call, when they
    hold at most `config.keep_tapes()` bytes."""
    nbytes = 0
    for c in caches:
        nbytes += c.nbytes
    if nbytes <= config.keep_tapes():
        fn._zymo_tapes = caches


def reuse_list(tape, slot):
    """A list cache from a tape passed back in (emptied), or a new one."""
    if tape is not None and tape[slot] is not None:
        lst = tape[slot]
        lst.clear()
        return lst
    return []


def fdiv(a, b):
    """`a / b`, where a zero divisor gives inf or nan as IEEE (NumPy's) division does, not
    Python's `ZeroDivisionError`: what derivative rules of numbers divide with
    (`transform.emit.IEEEDivisions`). Arrays divide as NumPy divides them."""
    try:
        return a / b
    except ZeroDivisionError:
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.true_divide(a, b)
        return q.item() if isinstance(q, np.generic) else q


def fpow(a, b):
    """`a ** b`, where a zero base and a negative exponent give inf as NumPy's power does, not
    Python's `ZeroDivisionError`: what derivative rules of numbers raise to powers with
    (`transform.emit.IEEEDivisions`). Arrays compute as NumPy computes them."""
    try:
        return a ** b
    except ZeroDivisionError:
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.power(np.complex128(a) if np.iscomplexobj(a) else np.float64(a), b)
        return q.item() if isinstance(q, np.generic) else q


def span(lo, hi):
    """`hi - lo` as an int, or 0 where `hi <= lo`: compared before subtracting, so unsigned
    bounds never wrap (a trip count written out: `transform.emit.trip_count`)."""
    return int(hi) - int(lo) if hi > lo else 0


def trip(start, stop, step):
    """The number of iterations of `range(start, stop, step)` (as Python ints, as `range`
    reads its bounds: unsigned NumPy ints would wrap round below zero)."""
    start, stop, step = int(start), int(stop), int(step)
    if step > 0:
        return max(0, (stop - start + step - 1) // step)
    return max(0, (start - stop - step - 1) // (-step))


def extreme_mask(x, ans, axis, keepdims):
    """Weights of the elements of `x` equal to their max/min `ans`; ties share equally."""
    # `ans` broadcasts against `x` as it is (a number, or its reduced axes kept)
    eq = x == (ans if axis is None or keepdims else expand_reduced(ans, x, axis, keepdims))
    m = eq.astype(x.dtype if type(x) is np.ndarray and x.dtype.kind == "f" else np.result_type(x, 1.0))
    if axis is None:
        m /= np.count_nonzero(eq)
        return m
    return m / np.sum(m, axis=axis, keepdims=True)


def maybe_view_shadow(u, x, du, dx, zero):
    """Shadow of `u = reshape(x)`: the same view of `dx` when `u` views `x`, else fresh.

    Reverse mode asks for a fresh zero shadow (`zero=True`); forward mode for a copy of the
    reshaped tangent."""
    if np.may_share_memory(u, x):
        return check_shadow_view(u, x, du, dx)
    if zero:
        return np.zeros_like(u)
    return np.array(du, copy=True)


def reshape_shadow(du, u, x, dx):
    """`maybe_view_shadow(u, x, du, dx, True)` with the shadow first: second order reads the
    reverse program's reshape shadows through it (a rule whose result may view `du`)."""
    return maybe_view_shadow(u, x, du, dx, True)


def is_view(u, x):
    return np.may_share_memory(u, x)


def check_bound(trips, name):
    """A loop variable read after its loop exists only if the loop ran (Python's NameError)."""
    if trips <= 0:
        raise NameError(f"name {name!r} is not defined (its for loop ran zero times)")


def check_shadow_view(u, x, du, dx):
    """A shadow view must alias its parent's shadow exactly when the primal view does."""
    if np.may_share_memory(u, x) != np.may_share_memory(du, dx):
        from ..errors import ZymoUsageError

        raise ZymoUsageError(
            "reshape returned a view of the primal but a copy of its shadow (or the other way "
            "round): the shadow's memory layout differs from the primal's. Give the shadow the "
            "same layout (np.zeros_like(x)) or reshape a contiguous copy."
        )
    return du


def clip_inside(x, lo, hi):
    """1 where `lo <= x <= hi` (a bound of None is no bound), else 0, as a bool mask."""
    m = np.ones(np.shape(x), dtype=np.bool_)
    if lo is not None:
        m = m & (x >= lo)
    if hi is not None:
        m = m & (x <= hi)
    return m


# -- reductions and scans ------------------------------------------------------------------


def _axes(x, axis):
    """`axis` of a reduction of `x` as a tuple of non-negative ints (None: every axis)."""
    if axis is None:
        return tuple(range(np.ndim(x)))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return tuple(a % np.ndim(x) for a in axes)


def prod_others(x, axis):
    """For each element of `x`, the product of the other elements it is reduced with (exact
    with zeros: exclusive products from the left times exclusive products from the right)."""
    if np.ndim(x) == 0:
        return np.ones_like(x)
    x = np.asarray(x)
    if x.size == 0:  # nothing to multiply: an empty array of x's shape
        return np.ones_like(x)
    axes = _axes(x, axis)
    rest = [a for a in range(x.ndim) if a not in axes]
    perm = rest + list(axes)
    xt = np.transpose(x, perm)
    flat = xt.reshape(xt.shape[:len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], axis=-1), axis=-1), -1)
    return np.transpose((left * right).reshape(xt.shape), np.argsort(perm))


def centered(x, axis):
    """`x` minus its mean over `axis` (kept broadcastable)."""
    return x - np.mean(x, axis=axis, keepdims=True)


def cumsum_vjp(g, x, axis):
    """Adjoint of `np.cumsum(x, axis)`: reversed cumulative sums of `g`, in `x`'s shape."""
    if axis is None:
        flat = np.ravel(g)
        return np.reshape(np.flip(np.cumsum(np.flip(flat))), np.shape(x))
    if np.ndim(x) == 0:
        return np.reshape(g, ())
    return np.flip(np.cumsum(np.flip(g, axis), axis=axis), axis)


def _scan_layout(x, axis):
    """`x` with the scanned axis first (flattened when axis is None), and how to undo that."""
    x = np.asarray(x)
    if axis is None:
        return np.ravel(x), lambda r: np.reshape(r, x.shape)
    if x.ndim == 0:
        return np.reshape(x, (1,)), lambda r: np.reshape(r, ())
    a = axis % x.ndim
    return np.moveaxis(x, a, 0), lambda r: np.moveaxis(r, 0, a)


def cumprod_jvp(t, x, axis):
    """Tangent of `np.cumprod(x, axis)`: d_j = d_{j-1} x_j + p_{j-1} t_j (exact with zeros)."""
    xs, back = _scan_layout(x, axis)
    ts, _ = _scan_layout(np.broadcast_to(t, np.shape(x)), axis)
    d = np.empty(xs.shape, dtype=np.result_type(xs, ts))
    if xs.shape[0] == 0:  # an empty scan: an empty tangent
        return d if axis is None else back(d)
    p = xs[0]
    d[0] = ts[0]
    for j in range(1, xs.shape[0]):
        d[j] = d[j - 1] * xs[j] + p * ts[j]
        p = p * xs[j]
    return d if axis is None else back(d)


def cumprod_vjp(g, x, axis):
    """Adjoint of `np.cumprod(x, axis)`: p_{i-1} s_i with s_i = g_i + x_{i+1} s_{i+1}."""
    xs, back = _scan_layout(x, axis)
    gs, _ = _scan_layout(g, axis)
    n = xs.shape[0]
    out = np.empty(xs.shape, dtype=np.result_type(xs, gs))
    if n == 0:  # an empty scan: an empty adjoint
        return back(out)
    s = gs[n - 1]
    out[n - 1] = s
    for i in range(n - 2, -1, -1):
        s = gs[i] + xs[i + 1] * s
        out[i] = s
    p = np.ones_like(xs[0])
    for i in range(n):
        out[i] = out[i] * p
        p = p * xs[i]
    return back(out)


def norm_grad(x, nrm, ord, axis, keepdims):
    """d norm / d x, elementwise, for vector p-norms (ord >= 1, inf, -inf) and the Frobenius norm
    (`nrm` is the norm)."""
    if ord is not None and ord != "fro" and (isinstance(axis, tuple) and len(axis) == 2 or
                                             axis is None and np.ndim(x) == 2):
        # a matrix norm (`rules/reductions.norm.check` refuses these at the user's line)
        raise NotImplementedError(f"the derivative of the matrix norm ord={ord!r} is not supported")
    a = expand_reduced(nrm, x, axis, keepdims)
    if ord is None or ord == "fro" or ord == 2:
        return np.where(a == 0, 0.0 * x, x / np.where(a == 0, 1.0, a))
    if isinstance(ord, str):
        raise NotImplementedError(f"the derivative of norm ord={ord!r} is not supported")
    if np.isinf(ord):
        ax = tuple(range(np.ndim(x))) if axis is None else axis
        return np.sign(x) * extreme_mask(np.abs(x), nrm, ax, keepdims)
    if ord == 1:
        return np.sign(x)
    if ord < 1:
        raise NotImplementedError(f"the derivative of norm ord={ord} is not supported")
    return np.sign(x) * (np.abs(x) / np.where(a == 0, 1.0, a)) ** (ord - 1)




def is_given(v):
    """Whether an optional argument was given (`v is not None`), as rule bodies ask it: inlined,
    `2.5 is not None` would be a comparison with a literal, which Python warns of."""
    return v is not None


def linspace_unit(num, endpoint, like):
    """`np.linspace(0, 1, num, endpoint)` in the dtype of `like`."""
    return np.linspace(0.0, 1.0, num, endpoint=endpoint).astype(np.result_type(like))


def _linspace_weights(samples, num, endpoint, axis, stop_side):
    """d np.linspace(start, stop, num, endpoint, axis=axis) / d stop (or / d start), shaped
    (num, 1, ..., 1) against `ans` with its sample axis first, as NumPy computes the samples."""
    u = linspace_unit(num, endpoint, samples)
    w = u if stop_side else 1.0 - u
    return np.reshape(w, (-1,) + (1,) * (np.ndim(samples) - 1))


def linspace_jvp(t, samples, num, endpoint, axis, stop_side):
    """Tangent of `np.linspace(start, stop, num, endpoint, axis=axis)` along the tangent `t` of
    `stop` (`stop_side`) or of `start`: endpoints broadcast against each other, the samples run
    along `axis` (NumPy's semantics)."""
    d = _linspace_weights(samples, num, endpoint, axis, stop_side) * t
    # (the samples' shape; broadcast with it for the example values type inference passes)
    d = np.broadcast_to(d, np.broadcast_shapes(d.shape, np.moveaxis(samples, axis, 0).shape))
    return np.moveaxis(d, 0, axis).astype(np.result_type(samples), copy=True)


def linspace_vjp(g, samples, num, endpoint, axis, stop_side, end):
    """Adjoint of `stop` (`stop_side`) or `start` (`end`: that endpoint) in `np.linspace(start,
    stop, num, endpoint, axis=axis)`: the samples' adjoints weighted and summed along `axis`,
    then summed back to the endpoint's shape."""
    g0 = np.moveaxis(np.asarray(g), axis, 0)
    return unbroadcast(np.sum(g0 * _linspace_weights(samples, num, endpoint, axis, stop_side), axis=0), end)



def as_dtype(x, dtype):
    """A loop-carried float array whose dtype widens (float32 -> float64): a converted copy."""
    return x.astype(dtype)



def imag_copy(x):
    """Im(x) as fresh memory (NumPy's `np.imag` of an array is a view; zymo's rule is not)."""
    return np.imag(x).copy() if isinstance(x, np.ndarray) else np.imag(x)
