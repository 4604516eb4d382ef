"""Single-threaded benchmark runs: the process pinned to one core, one thread per library.

`one_core()` must run before NumPy and JAX are imported (their thread pools read the settings
at import). `benchmarks/run_kernels.py` calls it when run (decision 0024); `benchmarks/run.py`
with `--one-core`.
"""
from __future__ import annotations

import os
import sys


def one_core() -> str:
    """Run on one core, single-threaded, as the targets say: pin this process (and the new
    processes it starts, which inherit it) to the core it runs on, and ask OpenBLAS, OpenMP, MKL
    and XLA for one thread; before NumPy and JAX are imported. Unpinned, JAX's calls here waited
    on its own threads moving between the two cores: symm's gradient took 80-131 us (median),
    pinned 60 us; zymo's were the same either way. `--all-cores` (or `ZYMO_BENCH_ALL_CORES=1`)
    leaves the process as it is. Returns what was done, for the table's header."""
    if "--all-cores" in sys.argv or os.environ.get("ZYMO_BENCH_ALL_CORES") == "1":
        os.environ["ZYMO_BENCH_ALL_CORES"] = "1"  # the new processes too
        return "all cores, libraries' default threads"
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    flags = os.environ.get("XLA_FLAGS", "")
    if "intra_op_parallelism_threads" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    if not hasattr(os, "sched_setaffinity"):
        return "one thread per library (this platform cannot pin a process to a core)"
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[0]})
    return f"pinned to core {cores[0]} (of {len(cores)}), one thread per library"
