"""Complex numbers: the rules that are not holomorphic, and which rules take complex values.

Contract (JAX's convention, followed everywhere; docs/complex.md):

- A tangent of a complex value is complex: forward mode propagates `dz = dx + i dy`
  (R-linear). A tangent of a real value stays real.
- An adjoint (cotangent) `g` of a complex value `w` means `dL = Re(g * dw)`, with no
  conjugate. A reverse rule is then *linear* in `g`: a holomorphic primitive's `vjp` is
  `g * f'(z)`, the same body as for real numbers, so the rules of `COMPLEX_SAFE` hold
  unchanged. For a real loss, the adjoint of a complex input `z = x + iy` is
  `dL/dx - i dL/dy` (what `jax.grad` returns; its conjugate is the steepest-ascent
  direction).
- At a real -> complex boundary (a real operand of an op that has a complex operand or
  result), the adjoint that reaches the real operand is the real part of the rule's value
  (`transform/reverse.py`, `Reverse._vjp`), as JAX's transpose of a real-to-complex
  conversion does.
- Non-holomorphic primitives have rules of their own here: `abs`, `conj`, `real`, `imag`,
  `angle`, `vdot`, `complex(a, b)`. `complex_key` maps a call with complex values to the
  rule that differentiates it, or says why it refuses (the frontend raises that at the
  user's line): rules that compare or order numbers (`maximum`, `sign`, `clip`, sorting,
  `max`), conjugate inside their adjoint (`np.convolve`'s is a `np.correlate`), discard the
  imaginary part (`float`, a cast to a real dtype), or whose derivative formula assumes real
  numbers (`var`, `std`, `norm`, ...) are refused.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import runtime as _rt  # also the name inlined rule bodies use
from ..ir import types as T
from . import ufuncs  # noqa: F401  (registered first: np.abs and np.conj keep their real rules' keys)
from .registry import REGISTRY, Rule

_U = dict(elementwise=True)
# each rule's cases (zymo.testing.rule_cases) make complex values from real inputs: the generic real
# cases would call the real rules instead (np.abs of a real x is numpy.absolute)


class cabs(Rule, key="zymo.cabs", fn=np.abs, call="np.abs", **_U, cases=(
        ("fn(x * (1.0 + 2.0j) + 0.5j)", ((5,),)), ("fn(x * 1j - 0.5)", ((3, 4),)), ("fn(x * (2.0 - 1.0j))", ((),)))):
    """|z| of a complex z: tangent Re(conj(z) dz) / |z|, adjoint g conj(z) / |z| (0 at z = 0, as JAX)."""
    auto_cases = False
    def jvp_x(t, ans, x): return np.real(np.conj(x) * t) / (ans + (ans == 0))
    def vjp_x(g, ans, x): return g * np.conj(x) / (ans + (ans == 0))


class conj(Rule, key="zymo.conj", fn=np.conjugate, call="np.conj", **_U, cases=(
        ("np.real(fn(x * (1.0 + 2.0j)) * (0.5 - 1.5j))", ((5,),)), ("np.imag(fn(x * x + 1j * x))", ((),)))):
    """conj(z): tangent conj(dz), adjoint conj(g)."""
    auto_cases = False
    def jvp_x(t, ans, x): return np.conj(t)
    def vjp_x(g, ans, x): return np.conj(g)


class real(Rule, key="numpy.real", fn=np.real, view=True, cases=(
        ("fn((x + 1j) * (x - 2j))", ((5,),)), ("fn(x * (0.5 + 1j) * x)", ((3, 4),)))):
    """Re(z) of an array: a view of its real part, so its shadow is the same view of the shadow
    (tangent Re(dz); an adjoint g adds g to Re(dz), which is JAX's: dL/dx)."""
    def jvp_val(t, ans, val): return np.real(t)
    def vjp_val(g, ans, val): return g


class creal(Rule, key="zymo.creal", fn=np.real, call="np.real", cases=(
        ("fn((x + 1j) * (x - 2j))", ((),)), ("((x + 1j) * (x - 2j)).real", ((),)))):
    """Re(z) of a number: tangent Re(dz), adjoint g."""
    def jvp_val(t, ans, val): return np.real(t)
    def vjp_val(g, ans, val): return g


class imag(Rule, key="numpy.imag", fn=np.imag, template="_rt.imag_copy({0})", cases=(
        ("fn((x + 1j) * (x - 2j))", ((5,),)), ("fn((x + 1j) * (x - 2j))", ((),)),
        ("((x + 0.5j) * x).imag", ((3, 4),)))):
    """Im(z): tangent Im(dz), adjoint -i g (JAX's: dL/dx - i dL/dy with dL/dy = g). Not a view:
    an adjoint added into a view of Im(dz) would have the other sign, so the primal takes a copy
    and writing into `z.imag` is refused (`complex_key`'s caller)."""
    def jvp_val(t, ans, val): return np.imag(t)
    def vjp_val(g, ans, val): return -1j * g


class imag_copy(Rule, key="zymo.rt.imag_copy", fn=_rt.imag_copy, call="_rt.imag_copy", **_U, cases=(
        ("fn((x + 1j) * (x - 2j))", ((5,),)), ("fn((x + 1j) * (x - 2j))", ((),)))):
    """`numpy.imag`'s primal as zymo's reverse programs call it, a rule so that second order
    (forward mode over such a program: `zymo.hvp`, `zymo.hessian`) reads it as one op: Im(z) as
    fresh memory, with `numpy.imag`'s derivatives."""
    auto_cases = False
    def jvp_x(t, ans, x): return _rt.imag_copy(t)
    def vjp_x(g, ans, x): return -1j * g


class angle(Rule, key="numpy.angle", fn=np.angle, **_U, cases=(
        ("fn(x * (1.0 + 2.0j) + 0.5j)", ((5,),)), ("fn(x + 1j * x * x + 0.5, deg=True)", ((3, 4),)),
        ("fn(x - 0.5j)", ((),)))):
    """arg(z): tangent Im(conj(z) dz) / |z|^2, adjoint -i g conj(z) / |z|^2 (0 at z = 0). For a
    real x the derivative is 0: the adjoint's real part (`complex_adjoint`: its body is complex for a
    real operand too, so the reverse transform takes the real part whenever the operand is real)."""
    auto_cases = False
    complex_adjoint = True
    def jvp_z(t, ans, z, deg=False):
        return np.imag(np.conj(z) * t) / (np.real(z * np.conj(z)) + (z == 0)) * (57.29577951308232 if deg else 1.0)

    def vjp_z(g, ans, z, deg=False):
        return -1j * g * np.conj(z) / (np.real(z * np.conj(z)) + (z == 0)) * (57.29577951308232 if deg else 1.0)


class vdot(Rule, key="numpy.vdot", fn=np.vdot, cases=(
        ("fn(x * (1.0 + 1j), y * (2.0 - 1j)).real", ((5,), (5,))), ("np.imag(fn(x + 1j * y, y * x))", ((3, 4), (3, 4))),
        ("fn(x, y)", ((5,), (5,))))):
    """sum(conj(a) * b) over the flattened arrays: conjugate-linear in `a`."""
    def jvp_a(t, ans, a, b): return np.vdot(t, b)
    def jvp_b(t, ans, a, b): return np.vdot(a, t)
    def vjp_a(g, ans, a, b): return np.reshape(np.conj(g * np.ravel(b)), np.shape(a))
    def vjp_b(g, ans, a, b): return np.reshape(g * np.conj(np.ravel(a)), np.shape(b))


class complex_(Rule, key="builtins.complex", fn=builtins.complex, cases=(
        ("fn(x, y).imag * fn(y, x * x).real", ((), ())), ("np.abs(fn(x, y * y))", ((), ())))):
    """complex(re, im) of two real numbers: tangent dre + i dim; adjoints Re(g), Re(i g)."""
    def jvp_real(t, ans, real=0.0, imag=0.0): return complex(t, 0.0)
    def jvp_imag(t, ans, real=0.0, imag=0.0): return complex(0.0, t)
    def vjp_real(g, ans, real=0.0, imag=0.0): return np.real(g)
    def vjp_imag(g, ans, real=0.0, imag=0.0): return np.real(1j * g)


# Rules whose real-number bodies are right for complex values under the convention above:
# holomorphic (`g * f'(z)`, `t * f'(z)`) or linear maps without a conjugate. Each is checked
# against JAX in tests/rules/test_complex.py.
COMPLEX_SAFE = frozenset({
    "add", "sub", "mul", "truediv", "neg", "pos", "pow", "matmul",
    "numpy.add", "numpy.subtract", "numpy.multiply", "numpy.divide", "numpy.negative", "numpy.positive",
    "numpy.power", "numpy.square", "numpy.sqrt", "numpy.reciprocal",
    "numpy.exp", "numpy.exp2", "numpy.expm1", "numpy.log", "numpy.log2", "numpy.log10", "numpy.log1p",
    "numpy.sin", "numpy.cos", "numpy.tan", "numpy.sinh", "numpy.cosh", "numpy.tanh",
    "numpy.arcsin", "numpy.arccos", "numpy.arctan", "numpy.arcsinh", "numpy.arccosh", "numpy.arctanh",
    "numpy.sum", "numpy.mean", "numpy.cumsum", "numpy.prod", "numpy.trace", "numpy.diagonal", "numpy.diag",
    "numpy.diag_view",
    "numpy.outer", "numpy.inner", "numpy.tensordot", "numpy.einsum", "numpy.einsum_view", "numpy.dot",
    "numpy.matmul", "numpy.kron",
    "numpy.copy", "numpy.copy_flat", "numpy.transpose", "numpy.reshape", "numpy.ravel", "numpy.swapaxes",
    "numpy.moveaxis", "numpy.squeeze", "numpy.expand_dims", "numpy.flip", "numpy.broadcast_to", "numpy.roll",
    "numpy.tile", "numpy.repeat", "numpy.atleast_1d", "numpy.atleast_2d", "numpy.atleast_3d",
    "numpy.concatenate", "numpy.stack", "numpy.hstack", "numpy.vstack", "zymo.concat2", "numpy.full",
    "numpy.where", "numpy.diff",
    "numpy.linalg.solve", "numpy.linalg.inv", "numpy.linalg.det",
    "zymo.as_dtype", "zymo.list_of",
    # helpers of reverse programs that second order differentiates (rules/runtime_rules.py): linear maps,
    # IEEE division and power of numbers (`_rt.fdiv`, `_rt.fpow`: holomorphic, `truediv`'s and `pow`'s
    # bodies), Im(z) (`imag_copy` above)
    "zymo.rt.unbroadcast", "zymo.rt.as_shape", "zymo.rt.as_tangent", "zymo.rt.expand_reduced", "zymo.rt.grow",
    "zymo.rt.grow_stack", "zymo.rt.mT", "zymo.rt.matmul_vjp_a", "zymo.rt.matmul_vjp_b", "zymo.rt.dot_vjp_a",
    "zymo.rt.dot_vjp_b", "zymo.fdiv", "zymo.fpow", "zymo.rt.imag_copy",
    # the rules above that exist for complex numbers, and the FFTs (rules/fft.py)
    "zymo.cabs", "zymo.conj", "numpy.real", "zymo.creal", "numpy.imag", "numpy.angle", "numpy.vdot",
    "builtins.complex",
})

# a call of these with a complex operand is differentiated by another rule
_COMPLEX_VARIANT = {"numpy.absolute": "zymo.cabs", "builtins.abs": "zymo.cabs", "numpy.conjugate": "zymo.conj"}
# which calls take no complex operand, and why
_WHY = {
    "builtins.float": "float() of a complex number raises TypeError in Python",
    "zymo.as_dtype": "a cast from complex to a real dtype discards the imaginary part",
}


def complex_key(key: str, arg_types: list[T.Type], result: T.Type | tuple) -> tuple[str, str | None]:
    """The rule for a call of `key` with these operand and result types when one of them is
    complex: (key to use, None), or (key, why it is refused)."""
    rule = REGISTRY[key]
    args_complex = any(T.is_complex(t) for t in arg_types)
    if args_complex and key in _COMPLEX_VARIANT:
        return _COMPLEX_VARIANT[key], None
    if key in _WHY and (args_complex and not (key == "zymo.as_dtype" and _is_complex_result(result))):
        return key, _WHY[key]
    if key == "numpy.real" and not isinstance(result, T.Array):  # a number, or a 0-d array's real part
        return "zymo.creal", None
    if key == "numpy.fft.rfft" and args_complex:
        return key, "NumPy's rfft takes a real array (use np.fft.fft for a complex one)"
    if key == "numpy.imag" and not args_complex:
        return key, "the imaginary part of a real number or array is a constant zero here"
    if key in COMPLEX_SAFE or key.startswith("numpy.fft."):
        return key, None
    results = result if isinstance(result, tuple) else (result,)
    if (rule.nondiff or rule.alloc) and not any(getattr(t, "differentiable", False) for t in results):
        return key, None  # a comparison, a size, an int: no derivative, right for any number
    if rule.alloc:
        return key, None  # fresh memory that no input flows into (zeros_like of a complex array)
    return key, (f"zymo's rule for {key} is written for real numbers (it compares or orders numbers, "
                 "or its derivative formula assumes them)")


def _is_complex_result(result: T.Type | tuple) -> bool:
    return not isinstance(result, tuple) and T.is_complex(result)
