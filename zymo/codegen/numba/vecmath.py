"""Transcendental functions of one element that LLVM's loop vectorizer may run four or eight
at a time, through glibc's vector math library (libmvec).

Contract: `call(context, builder, name, operands)` lowers NumPy's function `name` (`FUNCS`:
`exp`, `log`, `tanh`, `arctan2`, ...) of float64 or float32 numbers to a call of a small
function of the module, `zymo_vm_<name>` (`exp`, `expf`), that runs libmvec's vector version
of the C library's function on its operand in every lane and returns the first lane. The call
carries, as the attribute `vector-function-abi-variant`, the name of that vector version
(`_ZGVdN4v_exp`: four float64 lanes in AVX2 registers): in a loop LLVM vectorizes, each group
of lanes is one call of it; elsewhere the small function runs it for one element. Every
element is thus computed by the same vector version, whatever LLVM makes of the loop (vector
body, remainder, a parallel kernel's chunks), so its value depends on its operands only: the
same bits at every array length, in every layout, with any number of threads, and in numbers
outside loops. One version per function and float type is named: AVX2's where the host has
AVX2 and Numba compiles for the host (`NUMBA_CPU_NAME` unset; LLVM vectorizes doubles four at a
time there, AVX-512 hosts included), else SSE's, which every x86-64 CPU runs; and only one that
the loaded libmvec defines (glibc 2.22 to 2.34 have those of `exp`, `log`, `sin` and `cos`
only; a call of a version the library lacks would be a jump to address 0 at run time).
`covers(name, types)` says whether `call` takes the operands; it is false where `available()`
is (not Linux on x86-64, no libmvec, or `ZYMO_VECTOR_MATH=0`) or the library lacks the
function, and callers then use Numba's own lowering. `signature()` is the choice, for the keys
of compiled code.

Numerics: libmvec's functions are accurate to 4 units in the last place (glibc's manual); they
and Numba's scalar libm calls, and NumPy's own SIMD loops, can differ in the last bits, as
NumPy's and Numba's already do, and the SSE and AVX2 versions differ from each other there (the
same machine always runs the same one). Special values (inf, nan, overflow to inf, underflow
to 0) are IEEE's, as the scalar functions'.

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
# libmvec's x86-64 vector ABIs: (letter, register bits, the CPU feature it needs), preferred first
_ISAS = (("d", 256, "avx2"), ("b", 128, None))
_ATTR = "vector-function-abi-variant"


@functools.cache
def _isas() -> tuple[tuple[str, int], ...]:
    """The vector ABI to name, as a tuple of one `(letter, bits)` (module contract); () when
    libmvec is not to be used."""
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
    return next(((letter, bits),) for letter, bits, need in _ISAS if need is None or features.get(need))


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
    `(value, type)`: a call of `zymo_vm_<name>` with its vector version named."""
    from numba.core import types

    ty = operands[0][1]
    scalar, n = FUNCS[name]
    single = ty == types.float32
    cname = scalar + ("f" if single else "")
    ((letter, lanes),) = _variants(cname, n, 32 if single else 64)
    fn = _one_lane(builder.module, cname, ir.FloatType() if single else ir.DoubleType(), n, letter, lanes)
    instr = builder.call(fn, [v for v, _ in operands])
    mapping = f"_ZGV_LLVM_N{lanes}{'v' * n}_{fn.name}({_vector_name(letter, lanes, n, cname)})"
    for attr in ("nounwind", "willreturn", "memory(none)", f'"{_ATTR}"="{mapping}"'):
        set.add(instr.attributes, attr)  # llvmlite checks names against a list without these
    return instr, ty


def call_lanes(context, builder, name: str, ty, vectors):
    """NumPy's `name` of float vectors `vectors` (of `ty`'s elements, a multiple of the vector
    version's lanes; `covers(name, (ty,) * n)` holds), lane by lane: the vector version on
    each group of its lanes, the same bits `call` gives each element."""
    from numba.core import types

    scalar, n = FUNCS[name]
    single = ty == types.float32
    cname = scalar + ("f" if single else "")
    ((letter, lanes),) = _variants(cname, n, 32 if single else 64)
    width = vectors[0].type.count
    vt = ir.VectorType(vectors[0].type.element, lanes)
    vname = _vector_name(letter, lanes, n, cname)
    module = builder.module
    vfn = module.globals.get(vname) or ir.Function(module, ir.FunctionType(vt, [vt] * n), vname)
    parts = []
    for first in range(0, width, lanes):
        mask = ir.Constant(ir.VectorType(ir.IntType(32), lanes), list(range(first, first + lanes)))
        args = [builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), mask) for v in vectors]
        out = builder.call(vfn, args)
        for attr in ("nounwind", "willreturn", "memory(none)"):
            set.add(out.attributes, attr)
        parts.append(out)
    while len(parts) > 1:  # concatenated pairwise, lanes in order
        merged = []
        for a, b in zip(parts[::2], parts[1::2]):
            k = a.type.count
            mask = ir.Constant(ir.VectorType(ir.IntType(32), 2 * k), list(range(2 * k)))
            merged.append(builder.shuffle_vector(a, b, mask))
        parts = merged
    return parts[0]


def _one_lane(module: ir.Module, cname: str, elem: ir.Type, n: int, letter: str, lanes: int) -> ir.Function:
    """`zymo_vm_<cname>` of the module (defined with its first call): the vector version
    `_ZGV<letter>N<lanes>..._<cname>` of its operands in every lane, the first lane returned.
    Never inlined: the vectorizer replaces calls of it, and a call it cannot replace computes
    the same bits as the vector version."""
    name = f"zymo_vm_{cname}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    vt = ir.VectorType(elem, lanes)
    vname = _vector_name(letter, lanes, n, cname)
    vfn = module.globals.get(vname) or ir.Function(module, ir.FunctionType(vt, [vt] * n), vname)
    fn = ir.Function(module, ir.FunctionType(elem, [elem] * n), name)
    # not internal: LLVM would then be free to drop or fold its operands (a constant `log(1.0)`
    # became `zymo_vm_log()`), and the call would no longer match the vector version it names
    fn.linkage = "linkonce_odr"
    for attr in ("noinline", "nounwind", "willreturn", "memory(none)"):
        set.add(fn.attributes, attr)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    splats = []
    for arg in fn.args:
        v = ir.Constant(vt, ir.Undefined)
        for k in range(lanes):
            v = b.insert_element(v, arg, ir.Constant(ir.IntType(32), k))
        splats.append(v)
    b.ret(b.extract_element(b.call(vfn, splats), ir.Constant(ir.IntType(32), 0)))
    return fn
