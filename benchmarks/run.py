"""zymo's benchmark suite: the workloads of PEERS.md, zymo against Numba, JAX, PyTorch, autograd.

    python benchmarks/run.py                 # full sizes, all peers; prints the table,
                                             # writes docs/benchmarks.md and docs/benchmarks.png
    python benchmarks/run.py --quick         # small sizes (a smoke run, ~1 min)
    python benchmarks/run.py --only lorenz_rk4,tuple_iter --no-write
    python benchmarks/run.py --one-core      # single-threaded: pinned to one core, one thread per library

For every workload: the NumPy primal, the Numba primal (the same source under `njit`), zymo's
reverse-mode gradient as Python and compiled with Numba, and the peers' gradients of their
functional rewrites (`peers.py`). Every gradient is checked against zymo's Python gradient
(and that one against central finite differences) before anything is timed; a mismatch
stops the run. Times are medians of repeated calls after a warm-up call; first-call times
(zymo: pipeline + Numba compile; JAX: trace + XLA compile) are reported separately. By default
every library uses its own threads on all cores, as PEERS.md measured them; `--one-core` pins the
run to one core and asks each library for one thread (`_cores.one_core`, decision 0024: JAX's
small calls were slowed by its threads moving between this machine's two cores).
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _cores import one_core  # noqa: E402

# before NumPy and JAX are imported; the new processes the run starts inherit it
CORES = one_core() if "--one-core" in sys.argv else "each library's default threads"

import numpy as np  # noqa: E402
import peers  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import zymo  # noqa: E402
from zymo import Active, Const, Duplicated, DuplicatedNoNeed, Reverse  # noqa: E402

SLOW_CALL = 2.0  # seconds: a call slower than this is timed once


def median_time(fn, budget: float = 0.6, max_reps: int = 2000) -> float:
    """Median seconds per call of `fn()` over about `budget` seconds (after one warm-up call)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first > SLOW_CALL:
        return first
    reps = max(3, min(max_reps, int(budget / max(first, 1e-7))))
    inner = max(1, int(2e-4 / max(first, 1e-9)))  # batch tiny calls so timer overhead vanishes
    samples = []
    for _ in range(max(3, reps // inner)):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t) / inner)
    return statistics.median(samples)


def first_call(make):
    t = time.perf_counter()
    out = make()
    return out, time.perf_counter() - t


# -- the contestants -----------------------------------------------------------------------


def primal_call(w, data, jit=None):
    fn = jit or w.primal
    args, restore = data["args"], data["restore"]

    def call():
        restore()
        return fn(*args)
    return call


def zymo_call(w, data, numba, no_need=False):
    """A zero-argument gradient call (restoring inputs and zeroing shadows, as users must);
    `no_need`: the workload's `no_need` arguments passed as `DuplicatedNoNeed`."""
    args, restore = data["args"], data["restore"]
    shadows = {k: np.zeros_like(args[k]) for k in w.wrt}
    spare = {k: np.zeros_like(args[k]) for k in (w.no_need if no_need else ())}
    if w.name == "tuple_iter":
        out, x = args
        dout, dx = np.ones(1), shadows[1]

        def call_tuple():  # the whole per-call cost: annotations, checks, the derivative
            dout[0] = 1.0
            zymo.autodiff(Reverse, w.primal, Const, Duplicated(out, dout), Duplicated(x, dx), numba=numba)
            return (dx,)
        return call_tuple
    ann = [Duplicated(a, shadows[k]) if k in shadows else DuplicatedNoNeed(a, spare[k]) if k in spare else Const(a)
           for k, a in enumerate(args)]

    def call():
        restore()
        for s in (*shadows.values(), *spare.values()):
            s.fill(0.0)
        zymo.autodiff(Reverse, w.primal, Active, *ann, numba=numba)
        return tuple(shadows[k] for k in w.wrt)
    return call


def fd_check(w, size, grad):
    """Central finite differences of the primal at a few coordinates of each argument."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for pos, k in enumerate(w.wrt):
        base = w.make(size)["args"][k]
        for flat in rng.choice(base.size, size=min(3, base.size), replace=False):
            idx = np.unravel_index(flat, base.shape)
            vals = []
            for sign in (1, -1):
                data = w.make(size)
                arg = data["args"][k]
                h = 1e-6 * max(1.0, abs(arg[idx]))
                arg[idx] += sign * h
                if w.name == "tuple_iter":
                    w.primal(*data["args"])
                    vals.append(data["args"][0][0])
                else:
                    vals.append(w.primal(*data["args"]))
            fd = (vals[0] - vals[1]) / (2 * h)
            worst = max(worst, abs(grad[pos][idx] - fd) / max(1.0, abs(fd)))
    return worst


def rel_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y)))) / max(1.0, float(np.max(np.abs(y))))
               for x, y in zip(a, b))


# -- first calls in a new process (disk caches) ---------------------------------------------


def probe(name, quick, warm_numba):
    """Child process: seconds of the first zymo gradient call, whose compiled program is in the
    disk cache. `warm_numba`: Numba has already been imported and has compiled a trivial
    function, as in any process that uses Numba (its import and registry set-up, ~0.5 s
    here, then happen before the clock starts)."""
    import json

    w = WORKLOADS[name]
    size = w.small if quick else w.full
    call = zymo_call(w, w.make(size), numba=True)
    if warm_numba:
        import numba

        numba.njit(lambda a: a + 1)(1)
    assert warm_numba or "numba" not in sys.modules
    t = time.perf_counter()
    call()
    first = time.perf_counter() - t
    print(json.dumps({"first": first}))


def cold_probe(name, quick, primal):
    """Child process: seconds of a first call that compiles from nothing (no disk cache): the
    Numba primal (`primal`), or zymo's Numba gradient (lowering, analyses, transform, Numba's
    compile). Numba and zymo are imported before the clock starts, so both pay Numba's one-time
    set-up of its first compile, as a user's first call does. zymo's pipeline modules, which
    its first call imports, are imported here too: on a machine that sets
    PYTHONDONTWRITEBYTECODE (this one does) each import compiles the module's source again,
    ~0.06 s that is import time, not compile time."""
    import importlib
    import json

    import numba

    for mod in ("zymo.transform.forward", "zymo.transform.reverse", "zymo.codegen.fuse", "zymo.codegen.numba.backend",
                "zymo.codegen.numba.twins"):
        importlib.import_module(mod)

    w = WORKLOADS[name]
    size = w.small if quick else w.full
    data = w.make(size)
    call = primal_call(w, data, numba.njit(w.primal)) if primal else zymo_call(w, data, numba=True)
    t = time.perf_counter()
    call()
    print(json.dumps({"first": time.perf_counter() - t}))


def numba_probe(name, quick):
    """Child process: the Numba primal under `njit(cache=True)`, from Numba's own disk cache."""
    import json

    w = WORKLOADS[name]
    size = w.small if quick else w.full
    data = w.make(size)
    t = time.perf_counter()
    import numba

    jit = numba.njit(cache=True)(w.primal)
    primal_call(w, data, jit)()
    print(json.dumps({"first": time.perf_counter() - t}))


def in_new_process(*flags, env=None):
    import json
    import subprocess

    out = subprocess.run([sys.executable, str(HERE / "run.py"), *flags], capture_output=True, text=True, check=True,
                         env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["first"]


COLD_RUNS = 3  # new processes per side; one compile on this shared machine varies by up to 1.8x


def cold_compile_times(name, quick):
    """(Numba primal, zymo) first-call seconds in new processes, compiling from nothing: the
    best of `COLD_RUNS` alternating pairs (zymo with an empty disk cache each time)."""
    import tempfile

    q = ["--quick"] if quick else []
    primal, zymo_ = [], []
    for _ in range(COLD_RUNS):
        env = dict(os.environ, ZYMO_CACHE_DIR=tempfile.mkdtemp(prefix="zymo-cold-"))
        primal.append(in_new_process("--cold-primal", name, *q))
        zymo_.append(in_new_process("--cold-zymo", name, *q, env=env))
    return min(primal), min(zymo_)


def disk_cache_times(name, quick):
    """(zymo with Numba cold, zymo with Numba warm, Numba primal) first-call seconds from disk."""
    q = ["--quick"] if quick else []
    numba_probe_flags = ["--numba-probe", name, *q]
    in_new_process(*numba_probe_flags)  # fill Numba's cache of the primal
    return (in_new_process("--probe", name, *q), in_new_process("--probe-warm", name, *q),
            in_new_process(*numba_probe_flags))


# -- one workload ----------------------------------------------------------------------------


def bench(name, size, use_peers, log, quick=False):
    import numba

    w = WORKLOADS[name]
    row = {"name": name, "size": size}

    # reference: zymo's Python gradient, checked against finite differences
    ref = zymo_call(w, w.make(size), numba=False)()
    ref = tuple(np.array(r, copy=True) for r in ref)
    row["fd_err"] = fd_check(w, size, ref)
    if row["fd_err"] > 1e-5:
        raise SystemExit(f"{name}: zymo's gradient disagrees with finite differences ({row['fd_err']:.1e})")

    data = w.make(size)
    row["numpy"] = median_time(primal_call(w, data))
    jit = numba.njit(w.primal)
    data = w.make(size)
    _, row["numba_compile"] = first_call(primal_call(w, data, jit))
    row["numba"] = median_time(primal_call(w, data, jit))
    log(f"  primal: numpy {fmt(row['numpy'])}, numba {fmt(row['numba'])} (compile {row['numba_compile']:.2f} s)")

    for label, flag in (("zymo_py", False), ("zymo_nb", True)):
        data = w.make(size)
        t = time.perf_counter()
        call = zymo_call(w, data, numba=flag)
        got = call()
        first = time.perf_counter() - t
        err = rel_diff(got, ref)
        if err > 1e-9:
            raise SystemExit(f"{name}: {label} disagrees with zymo's Python gradient ({err:.1e})")
        if flag:
            row["zymo_compile"] = first
        row[label] = median_time(call)
        log(f"  {label}: {fmt(row[label])} (first call {first:.2f} s, |diff| {err:.0e})")
    if w.no_need:  # what the peers compute: the gradient alone
        call = zymo_call(w, w.make(size), numba=True, no_need=True)
        err = rel_diff(call(), ref)
        if err > 1e-9:
            raise SystemExit(f"{name}: zymo_nb with DuplicatedNoNeed disagrees with zymo's Python gradient ({err:.1e})")
        row["zymo_nb_noneed"] = median_time(call)
        log(f"  zymo_nb, the buffers DuplicatedNoNeed: {fmt(row['zymo_nb_noneed'])} (|diff| {err:.0e})")
    if name == "tuple_iter":  # the bare call: annotations made once, nothing else per call
        out, x = data["args"]
        ann = (Duplicated(out, np.ones(1)), Duplicated(x, np.zeros_like(x)))
        row["zymo_nb_bare"] = median_time(lambda: zymo.autodiff(Reverse, w.primal, Const, *ann, numba=True))
        log(f"  zymo_nb, the autodiff call alone (annotations made once): {fmt(row['zymo_nb_bare'])}")
    row["cold_numba"], row["cold_zymo"] = cold_compile_times(name, quick)
    log(f"  first compile in a new process: Numba primal {row['cold_numba']:.2f} s, zymo {row['cold_zymo']:.2f} s")
    row["disk_cold"], row["disk_warm"], row["numba_disk"] = disk_cache_times(name, quick)
    log(f"  first call in a new process, from the disk caches: zymo {row['disk_cold']:.2f} s "
        f"({row['disk_warm']:.2f} s once Numba is loaded); Numba primal (cache=True) {row['numba_disk']:.2f} s")

    for peer in peers.PEERS if use_peers else ():
        if not peers.available(peer):
            continue
        make = peers.make_gradient(peer, name, w.make(size)["args"])
        if make is None:
            continue
        got, first = first_call(make)
        err = rel_diff(got, ref)
        if err > 1e-7:
            raise SystemExit(f"{name}: {peer} disagrees with zymo ({err:.1e})")
        row[peer] = median_time(make, budget=0.4) if first < 20 else first
        row[peer + "_compile"] = first
        log(f"  {peer}: {fmt(row[peer])} (first call {first:.2f} s, |diff| {err:.0e})")
    return row


# -- output ------------------------------------------------------------------------------------


def fmt(t):
    if t is None:
        return "—"
    if t < 1e-6:
        return f"{t * 1e9:.0f} ns"
    if t < 1e-3:
        return f"{t * 1e6:.1f} µs"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


COLUMNS = [("numpy", "NumPy primal"), ("numba", "Numba primal"), ("zymo_py", "zymo (Python)"),
           ("zymo_nb", "zymo (Numba)"), ("zymo_nb_noneed", "zymo (Numba), buffers DuplicatedNoNeed"),
           ("jax", "JAX jit"), ("torch", "PyTorch"), ("autograd", "autograd")]


def table(rows):
    head = ("| workload | " + " | ".join(c for _, c in COLUMNS) +
            " | zymo Numba / Numba primal | compile: Numba primal, zymo | first compile, new process: "
            "Numba primal, zymo | new process, from disk: Numba primal, zymo (Numba loaded) |")
    lines = [head, "|" + "---|" * (len(COLUMNS) + 5)]
    for r in rows:
        cells = [fmt(r.get(k)) for k, _ in COLUMNS]
        ratio = f"{r['zymo_nb'] / r['numba']:.1f}×"
        comp = f"{r['numba_compile']:.2f} s, {r['zymo_compile']:.2f} s"
        cold = f"{r['cold_numba']:.2f} s, {r['cold_zymo']:.2f} s"
        disk = f"{r['numba_disk']:.2f} s, {r['disk_cold']:.2f} s ({r['disk_warm']:.2f} s)"
        lines.append(f"| {r['name']} ({describe(r['size'])}) | " + " | ".join(cells) +
                     f" | {ratio} | {comp} | {cold} | {disk} |")
    return "\n".join(lines)


def describe(size):
    if size is None:
        return "x: 1×2"
    if isinstance(size, tuple) and len(size) == 3:
        return "d={}, k={}, n={}".format(*size)
    if isinstance(size, tuple):
        return f"B={size[0]}, " + "-".join(map(str, size[1]))
    return f"{size:,}"


def machine():
    import numba

    vers = [f"Python {platform.python_version()}", f"NumPy {np.__version__}", f"Numba {numba.__version__}"]
    from importlib import metadata

    for mod in ("jax", "torch", "autograd"):
        try:
            vers.append(f"{mod} {metadata.version(mod)}")
        except metadata.PackageNotFoundError:
            pass
    return f"{platform.machine()}, {os.cpu_count()} cores ({CORES}), {platform.platform()}; " + ", ".join(vers)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k, _ in COLUMNS if k != "numpy"]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(keys)
    for j, key in enumerate(keys):
        vals = [r.get(key, math.nan) / r["numba"] for r in rows]
        ax.bar(np.arange(len(rows)) + j * width, vals, width, label=dict(COLUMNS)[key])
    ax.set_yscale("log")
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2, [r["name"] for r in rows], rotation=15)
    ax.set_ylabel("time / Numba primal (log)")
    ax.set_title("Gradient time relative to the Numba primal (lower is better)")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--no-peers", action="store_true", help="skip JAX, PyTorch and autograd")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.{md,png}")
    ap.add_argument("--one-core", action="store_true",
                    help="pin the run to one core and ask each library for one thread (decision 0024)")
    ap.add_argument("--probe", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--probe-warm", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--numba-probe", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--cold-primal", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--cold-zymo", metavar="NAME", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.cold_primal or opts.cold_zymo:
        return cold_probe(opts.cold_primal or opts.cold_zymo, opts.quick, primal=bool(opts.cold_primal))
    if opts.probe or opts.probe_warm:
        return probe(opts.probe or opts.probe_warm, opts.quick, warm_numba=bool(opts.probe_warm))
    if opts.numba_probe:
        return numba_probe(opts.numba_probe, opts.quick)
    # a fresh disk cache, so first calls are cold compiles (the new-process probes inherit it)
    import tempfile

    os.environ["ZYMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="zymo-bench-")
    names = [n for n in WORKLOADS if not opts.only or n in opts.only.split(",")]
    rows = []
    for name in names:
        w = WORKLOADS[name]
        size = w.small if opts.quick else w.full
        print(f"{name} ({describe(size)})", flush=True)
        rows.append(bench(name, size, not opts.no_peers, lambda s: print(s, flush=True), quick=opts.quick))
    text = table(rows)
    print("\n" + text)
    if not opts.no_write and not opts.quick:
        docs = HERE.parent / "docs"
        (docs / "benchmarks_table.md").write_text(f"Machine: {machine()}\n\n{text}\n")
        try:
            plot(rows, docs / "benchmarks.png")
        except ImportError:
            print("\nmatplotlib is not installed (pip install -e '.[bench]'): no plot")
        print(f"\nwrote {docs / 'benchmarks_table.md'}")


if __name__ == "__main__":
    main()
