"""Transcendental functions of one element that LLVM's loop vectorizer may run four or eight
at a time, through glibc's vector math library (libmvec).

Contract: `call(context, builder, name, operands)` lowers NumPy's function `name` (`FUNCS`:
`exp`, `log`, `tanh`, `arctan2`, ...) of float64 or float32 numbers to a call of the C library's
own scalar function (`exp`, `expf`) that carries, as the attribute
`vector-function-abi-variant`, the names of libmvec's vector versions of it
(`_ZGVdN4v_exp`: four float64 lanes in AVX2 registers). The scalar call stays what runs outside
vectorized loops; in a loop LLVM vectorizes, each group of lanes is one call of the vector
version. `covers(name, types)` says whether `call` takes the operands; None of it applies where
`available()` is false (not Linux on x86-64, no libmvec, or `ZYMO_VECTOR_MATH=0`), and
callers then use Numba's own lowering.

Numerics: libmvec's functions are accurate to 4 units in the last place (glibc's manual); they
and Numba's scalar libm calls, and NumPy's own SIMD loops, can differ in the last bits, as
NumPy's and Numba's already do. Special values (inf, nan, overflow to inf, underflow to 0) are
IEEE's, as the scalar functions'. Open (found by review; xfail tests in
tests/codegen/test_numba_vecmath.py): the scalar function, the SSE, the AVX2 and the AVX-512
versions differ from one another in the last bits, and which of them computes an element is
LLVM's choice by the loop's length (vector body, vector epilogue, scalar remainder), so an
element's value depends on the array's length, and a parallel kernel's chunks (threads > 1)
differ from the serial loop's bits, which codegen/parallel.py promises.
Only the lanes the CPU has are named: SSE for every x86-64
CPU, AVX2 and AVX-512 where the host has them and Numba compiles for the host
(`NUMBA_CPU_NAME` unset), and only the vector versions this libmvec defines (glibc 2.22 to
2.34 have those of `exp`, `log`, `sin` and `cos` only; a call of a vector version the library
lacks would be a jump to address 0 at run time). A function with none of them is Numba's own
lowering (`covers` is false). `signature()` is that choice, for the keys of compiled code.

Why: Numba lowers `np.exp` to LLVM's `llvm.exp` intrinsic, which the vectorizer widens and the
backend then splits into one libm call per element (7.7 ns per float64 here, against NumPy's
1.1 ns); pip's llvmlite has no SVML, and `-vector-library` is not among its options. The
attribute is how OpenMP's `declare simd` reaches the vectorizer, per call site.
"""
from __future__ import annotations

import functools
import os
import platform
import sys

from llvmlite import ir

# NumPy's name -> (C library's name, operands); float32 takes the name with an "f"
FUNCS = {
    "exp": ("exp", 1), "exp2": ("exp2", 1), "expm1": ("expm1", 1),
    "log": ("log", 1), "log2": ("log2", 1), "log10": ("log10", 1), "log1p": ("log1p", 1),
    "sin": ("sin", 1), "cos": ("cos", 1), "tan": ("tan", 1),
    "arcsin": ("asin", 1), "arccos": ("acos", 1), "arctan": ("atan", 1),
    "sinh": ("sinh", 1), "cosh": ("cosh", 1), "tanh": ("tanh", 1),
    "arcsinh": ("asinh", 1), "arccosh": ("acosh", 1), "arctanh": ("atanh", 1),
    "cbrt": ("cbrt", 1), "arctan2": ("atan2", 2), "hypot": ("hypot", 2),
}
# libmvec's x86-64 vector ABIs: (letter, register bits, the CPU feature it needs)
_ISAS = (("b", 128, None), ("d", 256, "avx2"), ("e", 512, "avx512f"))
_ATTR = "vector-function-abi-variant"


@functools.cache
def _isas() -> tuple[tuple[str, int], ...]:
    """The vector ABIs to name (module contract), () when libmvec is not to be used."""
    if os.environ.get("ZYMO_VECTOR_MATH", "1") == "0":
        return ()
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return ()
    import llvmlite.binding as ll

    try:
        ll.load_library_permanently("libmvec.so.1")
    except RuntimeError:
        return ()
    from numba.core import config

    if config.CPU_NAME or config.CPU_FEATURES:  # portable code: the lanes every x86-64 has
        return (("b", 128),)
    features = ll.get_host_cpu_features()
    return tuple((letter, bits) for letter, bits, need in _ISAS if need is None or features.get(need))


def available() -> bool:
    return bool(_isas())


def _vector_name(letter: str, lanes: int, n: int, cname: str) -> str:
    return f"_ZGV{letter}N{lanes}{'v' * n}_{cname}"


@functools.cache
def _variants(cname: str, n: int, bits_per_lane: int) -> tuple[tuple[str, int], ...]:
    """The vector ABIs (letter, lanes) of `_isas()` whose version of the C library's `cname`
    (`n` operands, lanes of `bits_per_lane` bits) the loaded libmvec defines."""
    import llvmlite.binding as ll

    return tuple((letter, bits // bits_per_lane) for letter, bits in _isas()
                 if ll.address_of_symbol(_vector_name(letter, bits // bits_per_lane, n, cname)))


def _all_variants() -> list[tuple[str, int, ir.Type, int]]:
    """Every vector version to name: (its name, operands, element type, lanes)."""
    found = []
    for scalar, k in FUNCS.values():
        for suffix, elem, width in (("", ir.DoubleType(), 64), ("f", ir.FloatType(), 32)):
            for letter, lanes in _variants(scalar + suffix, k, width):
                found.append((_vector_name(letter, lanes, k, scalar + suffix), k, elem, lanes))
    return found


def signature() -> str:
    """The choice of vector ABIs and the vector versions found, for the keys of compiled code."""
    letters = "".join(letter for letter, _ in _isas())
    if not letters:
        return "libmvec:"
    import hashlib

    names = ",".join(vname for vname, _, _, _ in _all_variants())
    return f"libmvec:{letters}:{hashlib.sha256(names.encode()).hexdigest()[:12]}"


def covers(name: str, tys) -> bool:
    """`call` takes NumPy's `name` of operands of Numba types `tys`: one float type, float64
    or float32, for each operand the function takes, and libmvec has a vector version of
    the function for that type."""
    from numba.core import types

    spec = FUNCS.get(name)
    if not (spec is not None and available() and len(tys) == spec[1]
            and len(set(tys)) == 1 and tys[0] in (types.float64, types.float32)):
        return False
    single = tys[0] == types.float32
    return bool(_variants(spec[0] + ("f" if single else ""), spec[1], 32 if single else 64))


def call(context, builder, name: str, operands):
    """NumPy's `name` of `operands` (`(value, type)` pairs `covers` takes), as
    `(value, type)`: a call of the C library's function with its vector versions named."""
    from numba.core import types

    ty = operands[0][1]
    scalar, n = FUNCS[name]
    single = ty == types.float32
    cname = scalar + ("f" if single else "")
    elem = ir.FloatType() if single else ir.DoubleType()
    fn = _declare(builder.module, cname, elem, n)
    variants = [f"_ZGV_LLVM_N{lanes}{'v' * n}_{cname}({_vector_name(letter, lanes, n, cname)})"
                for letter, lanes in _variants(cname, n, 32 if single else 64)]
    instr = builder.call(fn, [v for v, _ in operands])
    for attr in ("nounwind", "willreturn", "memory(none)", f'"{_ATTR}"="{",".join(variants)}"'):
        set.add(instr.attributes, attr)  # llvmlite checks names against a list without these
    return instr, ty


def _declare(module: ir.Module, cname: str, elem: ir.Type, n: int) -> ir.Function:
    """The scalar function `cname`, and its vector versions kept alive through the module's
    optimization by `llvm.compiler.used` (the vectorizer looks them up by name; an unused
    declaration would be dropped before it runs). Every vector version of every function is
    declared with the module's first call, so the module has one such list."""
    if "llvm.compiler.used" not in module.globals:
        kept = []
        for name, k, e, lanes in _all_variants():
            vt = ir.VectorType(e, lanes)
            kept.append(module.globals.get(name) or ir.Function(module, ir.FunctionType(vt, [vt] * k), name))
        i8p = ir.IntType(8).as_pointer()
        arr = ir.ArrayType(i8p, len(kept))
        used = ir.GlobalVariable(module, arr, "llvm.compiler.used")
        used.linkage = "appending"
        used.section = "llvm.metadata"
        used.initializer = ir.Constant(arr, [f.bitcast(i8p) for f in kept])
    fn = module.globals.get(cname)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(elem, [elem] * n), cname)
    return fn
