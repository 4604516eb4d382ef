"""The Numba backend: generated derivative source rewritten, compiled with `numba.njit` and cached.

Contract: `backend.compile_numba` is the entry point (what `zymo.api` calls); `rewrites` and
`ew_rewrite` turn the Python backend's source into the source Numba compiles; `elementwise`,
`accumulate` and `inline` are the intrinsics that source calls, `np_shim` the `np` it sees,
`twins` the `_rt` it sees (one module of compiled twins per `zymo/runtime` family), `pipeline`
and `lowering` Numba's compiler passes as zymo runs them. Importing this package imports
nothing from Numba; its modules other than `backend`, `rewrites`, `ew_rewrite` and `lines`
import Numba when they are imported.
"""
