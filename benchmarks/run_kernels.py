"""zymo on real kernels (PolyBench-style and scientific codes, `kernels.py`) against JAX and NumPy.

    python benchmarks/run_kernels.py                  # full sizes; writes docs/benchmarks_kernels.md (+ .png)
    python benchmarks/run_kernels.py --quick          # small sizes (a smoke run)
    python benchmarks/run_kernels.py --only gemm,lu --no-write

For every kernel, first the gradients are built and checked: zymo's reverse-mode gradient
with the Python backend, zymo's with Numba (`numba=True`) and JAX's `jit(grad)` of the
functional port (`kernels_jax.py`), each built once, at the timed size, its first call timed
(zymo's Python gradient: `zymo.cache.cache_clear()`, an empty disk cache and its generated modules
dropped, so the whole pipeline runs; zymo's Numba gradient: in a new process with Numba loaded,
the pipeline and Numba's compile, within `--numba-timeout` seconds, and this process then loads
the compiled program from the disk cache; the kernels backend's first call is timed again in
another new process, from that disk cache; the new processes load zymo's modules from Python's
bytecode cache, written once at the start, as for an installed package; zymo's kernels backend
with its sums free to run in any order, `zymo.config.set_reassociate(True)`, in a new process too;
JAX: trace and XLA compile). The run is single-threaded: pinned to one core, each library
asked for one thread (`_cores.one_core`; `--all-cores` leaves it as it is). Then, at the small
size, zymo's Python gradient against central finite differences along a few random
directions, and the others against it; at the timed size, again against it. A refusal is
recorded with the error's first line; a mismatch is recorded and the kernel is not timed.
Then, at the timed size: the NumPy primal and the gradients (medians of repeated calls
after a warm-up call; inputs the primal overwrites are restored before every call, in every
column), and the peak memory that tracemalloc sees during one call of the primal and of
zymo's Python-backend gradient (NumPy's allocations; not Numba's or XLA's).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cores import one_core

# only when run, not when imported (`parallel.py` imports the helpers and measures threads)
CORES = one_core() if __name__ == "__main__" else "as the importing program set it"

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kernels import KERNELS  # noqa: E402

import zymo  # noqa: E402
import zymo.cache  # noqa: E402
from zymo import Active, Const, Duplicated, Reverse  # noqa: E402

SLOW_CALL = 2.0  # seconds: a call slower than this is timed once
FD_TOL = 1e-6  # |<g, d> - central difference| / max(1, |central difference|)
AGREE_TOL = 1e-8  # max |g - g_ref| / max(1, max |g_ref|), per argument


def median_time(fn, budget: float = 0.5, max_reps: int = 1000) -> float:
    """Median seconds per call of `fn()` over about `budget` seconds (after one warm-up call)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first > SLOW_CALL:
        return first
    reps = max(3, min(max_reps, int(budget / max(first, 1e-7))))
    inner = max(1, int(2e-4 / max(first, 1e-9)))
    samples = []
    for _ in range(max(3, reps // inner)):
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t) / inner)
    return statistics.median(samples)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".strip()


# -- the contestants --------------------------------------------------------------------------


class Inputs:
    """Fresh arguments of a kernel at a size, and `restore()`, which puts back the entry values
    of the arrays the primal overwrites (found by running the primal once on a copy)."""

    def __init__(self, k, size):
        self.args = k.make(size)
        self.orig = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in self.args]
        probe = k.make(size)
        k.primal(*probe)
        self.mutated = [i for i, a in enumerate(self.args)
                        if isinstance(a, np.ndarray) and not np.array_equal(probe[i], a)]

    def restore(self):
        for i in self.mutated:
            np.copyto(self.args[i], self.orig[i])


def primal_call(k, inp):
    args, restore = inp.args, inp.restore

    def call():
        restore()
        return k.primal(*args)
    return call


def zymo_call(k, inp, numba):
    """A zero-argument gradient call (restoring the inputs and zeroing the shadows, as users must)."""
    args, restore = inp.args, inp.restore
    shadows = {i: np.zeros_like(args[i]) for i in k.wrt}
    ann = [Duplicated(a, shadows[i]) if i in shadows else Const(a) for i, a in enumerate(args)]

    def call():
        restore()
        for s in shadows.values():
            s.fill(0.0)
        zymo.autodiff(Reverse, k.primal, Active, *ann, numba=numba)
        return tuple(shadows[i] for i in k.wrt)
    return call


def cold(make_call):
    """(call, its result, seconds of its first call) with zymo's caches empty: memory, disk, and the
    generated modules of Numba programs (`zymo.codegen.numba.backend` keeps them in `sys.modules` by
    digest, with their compiled dispatchers), so a first call compiles again."""
    zymo.cache.cache_clear()
    os.environ["ZYMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="zymo-kernels-")
    for mod in [m for m in sys.modules if m.startswith("zymo_generated_")]:  # compiled modules kept by digest
        del sys.modules[mod]
    call = make_call()
    t = time.perf_counter()
    got = call()
    first = time.perf_counter() - t
    return call, tuple(np.array(g, copy=True) for g in got), first


class NumbaRefusal(Exception):
    """zymo's Numba gradient failed (or did not compile in time) in the new process."""

    def __str__(self):
        return self.args[0]


def numba_first_call(k, size, timeout, backend="numba", fresh=True, reorder=False):
    """Seconds of the first call of zymo's Numba gradient in a new process (Numba loaded and set up
    first, zymo's disk cache empty: the whole pipeline and Numba's compile), or a string saying why
    there is none (the error's first line; a compile that did not finish within `timeout` seconds).
    The new process leaves the compiled program in the disk cache this process then uses
    (`ZYMO_CACHE_DIR`, set here to a new empty folder). `reorder`: with sums in any order
    (`ZYMO_REASSOCIATE=1`, `zymo.config.set_reassociate`)."""
    import json
    import subprocess

    if fresh:  # else the disk cache is the one the last call filled (programs already built here keep working)
        zymo.cache.cache_clear()
        os.environ["ZYMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="zymo-kernels-")
        for mod in [m for m in sys.modules if m.startswith("zymo_generated_")]:
            del sys.modules[mod]
    cmd = [sys.executable, str(HERE / "run_kernels.py"), "--numba-child", k.name, "--child-size", repr(size),
           "--child-backend", backend]
    try:
        env = dict(os.environ)
        # with Python's bytecode cache, as an installed package has it: the new process then times
        # the derivative's first call, not Python compiling zymo's lazily imported modules from source
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["ZYMO_REASSOCIATE"] = "1" if reorder else "0"
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return f"the Numba compile did not finish in {timeout:.0f} s (stopped)"
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        err = [ln for ln in out.stderr.strip().splitlines() if ln and not ln.startswith(" ")]
        return f"the new process failed: {err[-1] if err else out.returncode}"
    res = json.loads(lines[-1])
    return res.get("first", res.get("error"))


def numba_child(name, size, backend="numba"):
    """In the new process of `numba_first_call`: print {"first": seconds} or {"error": first line}.
    `backend`: "numba" (the whole program compiled, `numba=True`) or "kernels" (`numba="kernels"`)."""
    import ast
    import json

    import numba

    numba.njit(lambda a: a + 1)(1)  # Numba's one-time set-up, as in any process that uses Numba
    k = KERNELS[name]
    call = zymo_call(k, Inputs(k, ast.literal_eval(size)), numba=True if backend == "numba" else "kernels")
    t = time.perf_counter()
    try:
        call()
    except Exception as e:
        print(json.dumps({"error": first_line(e)}))
        return
    print(json.dumps({"first": time.perf_counter() - t}))


@contextlib.contextmanager
def reordered():
    """zymo's compiled sums free to run in any order (`zymo.config.set_reassociate`) inside."""
    zymo.config.set_reassociate(True)
    try:
        yield
    finally:
        zymo.config.set_reassociate(None)


def jax_available() -> bool:
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def fd_error(k, size, grad, directions=3):
    """Worst relative error of <grad, d> against central differences along random directions d."""
    rng = np.random.default_rng(42)
    worst = 0.0
    for _ in range(directions):
        ds = {i: rng.standard_normal(np.shape(k.make(size)[i])) for i in k.wrt}
        vals = []
        for sign in (1.0, -1.0):
            args = k.make(size)
            h = 1e-6
            for i in k.wrt:
                args[i] = args[i] + sign * h * ds[i]
            vals.append(float(k.primal(*args)))
        fd = (vals[0] - vals[1]) / (2 * h)
        dot = sum(float(np.sum(g * ds[i])) for i, g in zip(k.wrt, grad))
        worst = max(worst, abs(dot - fd) / max(1.0, abs(fd)))
    return worst


def rel_diff(got, ref):
    return max(float(np.max(np.abs(np.asarray(g) - np.asarray(r)))) / max(1.0, float(np.max(np.abs(r))))
               for g, r in zip(got, ref))


# -- one kernel ---------------------------------------------------------------------------------


def checked_gradients(k, size, row, use_jax, log, numba_timeout):
    """The gradients, each built once: zymo's Python and Numba programs from empty caches at the
    timed size (their first calls, the compile included, are timed there) and JAX's jit(grad);
    each is then checked at the small size (zymo's Python gradient against central differences,
    the others against it, the programs already built) and compared again at the timed size.
    Returns {contestant: zero-argument call at the timed size} for those to time, or None
    (row["status"] says why) when the kernel is not to be timed: a refusal of zymo's Python
    backend, or any mismatch."""
    small = k.small
    calls = {}
    try:
        calls["py"], ref, row["py_first"] = cold(lambda: zymo_call(k, Inputs(k, size), numba=False))
        ref_small = tuple(np.array(g, copy=True) for g in zymo_call(k, Inputs(k, small), numba=False)())
    except Exception as e:  # a refusal is a finding, recorded
        row["status"] = f"zymo refuses: {first_line(e)}"
        return None
    row["fd"] = fd_error(k, small, ref_small)
    if not row["fd"] <= FD_TOL:
        row["status"] = f"MISMATCH: zymo (Python) vs finite differences {row['fd']:.1e}"
        return None
    try:
        row["nb_first"] = numba_first_call(k, size, numba_timeout)  # in a new process, filling the disk cache
        if isinstance(row["nb_first"], str):
            raise NumbaRefusal(row.pop("nb_first"))
        calls["nb"] = zymo_call(k, Inputs(k, size), numba=True)  # from the disk cache
        got = calls["nb"]()
        row["nb_small"] = rel_diff(zymo_call(k, Inputs(k, small), numba=True)(), ref_small)
        row["nb_diff"] = rel_diff(got, ref)
        for key, where in (("nb_small", ""), ("nb_diff", " at the timed size")):
            if not row[key] <= AGREE_TOL:
                row["status"] = f"MISMATCH{where}: zymo (Numba) vs zymo (Python) {row[key]:.1e}"
                return None
    except Exception as e:
        calls.pop("nb", None)
        row.pop("nb_first", None)
        row["numba_refusal"] = str(e) if isinstance(e, NumbaRefusal) else first_line(e)
        log(f"  zymo (Numba): {row['numba_refusal']}")
    try:  # the loops compiled, the rest Python (`numba="kernels"`)
        # the kernels' module is not the whole program's: the child compiles it with the cache as it is
        row["kn_first"] = numba_first_call(k, size, numba_timeout, backend="kernels", fresh=False)
        if isinstance(row["kn_first"], str):
            raise NumbaRefusal(row.pop("kn_first"))
        # again in a new process, now from the disk cache the first one filled (zymo's program, Numba's kernels)
        cached = numba_first_call(k, size, numba_timeout, backend="kernels", fresh=False)
        if isinstance(cached, float):
            row["kn_cached"] = cached
        calls["kn"] = zymo_call(k, Inputs(k, size), numba="kernels")  # from the disk cache
        got = calls["kn"]()
        row["kn_small"] = rel_diff(zymo_call(k, Inputs(k, small), numba="kernels")(), ref_small)
        row["kn_diff"] = rel_diff(got, ref)
        for key, where in (("kn_small", ""), ("kn_diff", " at the timed size")):
            if not row[key] <= AGREE_TOL:
                row["status"] = f"MISMATCH{where}: zymo (kernels) vs zymo (Python) {row[key]:.1e}"
                return None
    except Exception as e:  # a failure (or a compile past the timeout) is recorded, the row kept
        calls.pop("kn", None)
        row.pop("kn_first", None)
        row["kernels_refusal"] = str(e) if isinstance(e, NumbaRefusal) else first_line(e)
        log(f"  zymo (kernels): {row['kernels_refusal']}")
    if "kn" in calls:  # the same, its compiled sums free to run in any order (`config.set_reassociate`)
        try:
            row["kr_first"] = numba_first_call(k, size, numba_timeout, backend="kernels", fresh=False, reorder=True)
            if isinstance(row["kr_first"], str):
                raise NumbaRefusal(row.pop("kr_first"))
            with reordered():
                calls["kr"] = zymo_call(k, Inputs(k, size), numba="kernels")  # from the disk cache
                got = calls["kr"]()
                row["kr_small"] = rel_diff(zymo_call(k, Inputs(k, small), numba="kernels")(), ref_small)
            row["kr_diff"] = rel_diff(got, ref)
            for key, where in (("kr_small", ""), ("kr_diff", " at the timed size")):
                if not row[key] <= AGREE_TOL:
                    row["status"] = f"MISMATCH{where}: zymo (kernels, sums reordered) vs zymo (Python) {row[key]:.1e}"
                    return None
        except Exception as e:
            calls.pop("kr", None)
            row.pop("kr_first", None)
            row["reorder_refusal"] = str(e) if isinstance(e, NumbaRefusal) else first_line(e)
            log(f"  zymo (kernels, sums reordered): {row['reorder_refusal']}")
    if use_jax:
        import kernels_jax

        try:
            row["jax_small"] = rel_diff(kernels_jax.make_gradient(k.name, k.make(small), k.wrt)(), ref_small)
            t = time.perf_counter()
            calls["jax"] = kernels_jax.make_gradient(k.name, k.make(size), k.wrt)
            got = calls["jax"]()
            row["jax_first"] = time.perf_counter() - t
        except Exception as e:  # a bug of the port, not zymo's
            row["status"] = f"JAX port fails: {first_line(e)}"
            return None
        row["jax_diff"] = rel_diff(got, ref)
        for key, where in (("jax_small", ""), ("jax_diff", " at the timed size")):
            if not row[key] <= AGREE_TOL:
                row["status"] = f"MISMATCH{where}: JAX vs zymo (Python) {row[key]:.1e}"
                return None
    return calls


def bench(k, size, use_jax, log, numba_timeout=600.0):
    row = {"name": k.name, "category": k.category, "style": k.style, "size": size, "small": k.small, "dims": k.dims}
    calls = checked_gradients(k, size, row, use_jax, log, numba_timeout)
    if calls is None:
        # nothing of a kernel that failed a check is reported
        for key in ("py_first", "nb_first", "kn_first", "kn_cached", "kr_first", "jax_first"):
            row.pop(key, None)
        log(f"  {row['status']}")
        return row
    log(f"  checks: finite differences {row['fd']:.0e}"
        + (f", Numba {row['nb_small']:.0e} (timed size {row['nb_diff']:.0e})" if "nb_small" in row else "")
        + (f", kernels {row['kn_small']:.0e} (timed size {row['kn_diff']:.0e})" if "kn_small" in row else "")
        + (f", reordered {row['kr_small']:.0e} (timed size {row['kr_diff']:.0e})" if "kr_small" in row else "")
        + (f", JAX {row['jax_small']:.0e} (timed size {row['jax_diff']:.0e})" if "jax_small" in row else ""))

    call = primal_call(k, Inputs(k, size))
    row["numpy"] = median_time(call)
    tracemalloc.start()
    call()
    row["numpy_mem"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    log(f"  NumPy primal {fmt(row['numpy'])}, peak {mib(row['numpy_mem'])}")

    call = calls["py"]
    row["py"] = median_time(call)
    tracemalloc.start()
    call()
    row["py_mem"] = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    log(f"  zymo (Python) {fmt(row['py'])} ({row['py'] / row['numpy']:.1f}x primal), "
        f"first call {row['py_first']:.2f} s,"
        f" peak {mib(row['py_mem'])}")
    if "nb" in calls:
        row["nb"] = median_time(calls["nb"])
        log(f"  zymo (Numba) {fmt(row['nb'])}, first call {row['nb_first']:.2f} s")
    if "kn" in calls:
        row["kn"] = median_time(calls["kn"])
        log(f"  zymo (kernels) {fmt(row['kn'])}, first call {row['kn_first']:.2f} s"
            + (f" ({row['kn_cached']:.2f} s from the disk cache)" if "kn_cached" in row else ""))
    if "kr" in calls:
        with reordered():
            row["kr"] = median_time(calls["kr"])
        log(f"  zymo (kernels, sums reordered) {fmt(row['kr'])}, first call {row['kr_first']:.2f} s")
    if "jax" in calls:
        row["jax"] = median_time(calls["jax"])
        log(f"  JAX jit(grad) {fmt(row['jax'])}, first call {row['jax_first']:.2f} s")
    row["status"] = "ok"
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


def mib(b):
    if b is None:
        return "—"
    return f"{b / 2 ** 10:.1f} KiB" if b < 2 ** 20 else f"{b / 2 ** 20:.2f} MiB"


def secs(t):
    return "—" if t is None else f"{t:.2f} s"


def describe(k_dims, size):
    vals = size if isinstance(size, tuple) else (size,)
    return ", ".join(f"{d}={v}" for d, v in zip(k_dims.split(", "), vals))


HEAD = ("| kernel | kind | style | size | NumPy primal | zymo Python grad (× primal) | zymo Python first call "
        "| zymo Numba grad (× primal) | zymo Numba first call | zymo kernels grad (× primal) | zymo kernels first call "
        "| zymo kernels, sums reordered: grad (× primal), first call "
        "| JAX jit(grad) (× primal) | JAX first call "
        "| peak memory: primal, zymo Python | checks |")


def table(rows):
    lines = [HEAD, "|" + "---|" * HEAD.count(" | ") + "---|"]
    for r in rows:
        p = r.get("numpy")

        def ratio(key):
            t = r.get(key)
            return "—" if t is None else f"{fmt(t)} ({t / p:.2g}×)"

        kn = ratio("kn")
        if "kernels_refusal" in r:
            kn = r["kernels_refusal"] if r["kernels_refusal"].startswith("the Numba compile") \
                else f"fails: {r['kernels_refusal']}"
        kr = f"{ratio('kr')}, {secs(r.get('kr_first'))}" if r.get("kr") else "—"
        if "reorder_refusal" in r:
            kr = f"fails: {r['reorder_refusal']}"
        nb = ratio("nb")
        if "numba_refusal" in r:
            slow = r["numba_refusal"].startswith("the Numba compile did not finish")
            nb = r["numba_refusal"] if slow else f"refused: {r['numba_refusal']}"
        checks = []
        if "fd" in r:
            checks.append(f"FD {r['fd']:.0e}")
        for key, timed, label in (("nb_small", "nb_diff", "Numba"), ("kn_small", "kn_diff", "kernels"),
                                  ("kr_small", "kr_diff", "reordered"), ("jax_small", "jax_diff", "JAX")):
            if key in r:
                at_size = f" (timed size {r[timed]:.0e})" if timed in r and r["size"] != r["small"] else ""
                checks.append(f"{label} {r[key]:.0e}{at_size}")
        status = r.get("status", "ok")
        check_cell = "; ".join(part for part in (", ".join(checks), "" if status == "ok" else f"**{status}**") if part)
        mem = "—" if p is None else f"{mib(r['numpy_mem'])}, {mib(r['py_mem'])}"
        lines.append(f"| {r['name']} | {r['category']} | {r['style']} | {describe(r['dims'], r['size'])} | {fmt(p)} "
                     f"| {ratio('py') if p else '—'} | {secs(r.get('py_first'))} | {nb if p else '—'} "
                     f"| {secs(r.get('nb_first'))} | {kn if p else '—'} | {secs(r.get('kn_first'))} "
                     f"| {kr if p else '—'} "
                     f"| {ratio('jax') if p else '—'} | {secs(r.get('jax_first'))} "
                     f"| {mem} | {check_cell} |")
    return "\n".join(lines)


def _geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(rows):
    """The issue's targets, measured on these rows: gradient time of zymo's fastest backend
    against JAX's (geometric mean, worst), and first calls against JAX's."""
    timed = [r for r in rows if r.get("jax") and r.get("numpy")]
    if not timed:
        return "No kernel timed against JAX: no summary."
    out = ["| measure | value |", "|---|---|"]
    best = {r["name"]: min((r[k], k) for k in ("py", "nb", "kn") if r.get(k)) for r in timed}
    ratios = {n: t / r["jax"] for r in timed for n, (t, _) in [(r["name"], best[r["name"]])]}
    worst = max(ratios, key=ratios.get)
    mean = _geomean(ratios.values())
    out.append(f"| gradient, zymo's fastest backend / JAX, geometric mean (target ≤ 0.2) | {mean:.2f} |")
    out.append(f"| gradient, zymo's fastest backend / JAX, worst (target ≤ 1.2) | {ratios[worst]:.2f} ({worst}) |")
    reorder = {r["name"]: min(r[k] for k in ("py", "nb", "kn", "kr") if r.get(k)) / r["jax"] for r in timed}
    if any(r.get("kr") for r in timed):
        top = max(reorder, key=reorder.get)
        out.append(f"| gradient, zymo's fastest backend / JAX, sums reordered allowed (`set_reassociate`): "
                   f"geometric mean, worst | {_geomean(reorder.values()):.2f}, {reorder[top]:.2f} ({top}) |")
    for key, label in (("py", "Python"), ("nb", "Numba"), ("kn", "kernels"), ("kr", "kernels, sums reordered")):
        g = _geomean([r[key] / r["jax"] for r in timed if r.get(key)])
        if g is not None:
            out.append(f"| gradient, zymo {label} / JAX, geometric mean | {g:.2f} |")
    for key, label in (("py_first", "Python"), ("nb_first", "Numba"), ("kn_first", "kernels"),
                       ("kr_first", "kernels, sums reordered")):
        firsts = [r for r in timed if isinstance(r.get(key), float) and r.get("jax_first")]
        if firsts:
            g = _geomean([r[key] / r["jax_first"] for r in firsts])
            slow = [r["name"] for r in firsts if r[key] > 1.0]
            out.append(f"| first call, zymo {label} / JAX, geometric mean (target ≤ 2) | {g:.2f} "
                       f"({len(slow)} of {len(firsts)} over 1 s{': ' + ', '.join(slow) if slow else ''}) |")
    cached = [r for r in timed if isinstance(r.get("kn_cached"), float)]
    if cached:
        worst_c = max(cached, key=lambda r: r["kn_cached"])
        out.append(f"| first call from the disk cache, zymo kernels, in a new process (target < 0.3 s) | "
                   f"geometric mean {_geomean([r['kn_cached'] for r in cached]):.2f} s, worst "
                   f"{worst_c['kn_cached']:.2f} s ({worst_c['name']}) |")
    py = _geomean([r["py"] / r["numpy"] for r in timed if r.get("py")])
    out.append(f"| gradient, zymo Python / NumPy primal, geometric mean, every kernel | {py:.2f} |")
    whole = {r["name"]: r["py"] / r["numpy"] for r in timed if r.get("py") and r.get("style") != "loops"}
    if whole:  # the target's "whole-array code": the kernels written with slices or whole arrays
        top = max(whole, key=whole.get)
        out.append(f"| gradient, zymo Python / NumPy primal, geometric mean on whole-array code (style not "
                   f"loops: {len(whole)} kernels; target ≤ 3) | {_geomean(whole.values()):.2f} (worst "
                   f"{whole[top]:.2f}, {top}) |")
    return "\n".join(out)


def machine():
    from importlib import metadata

    import numba

    vers = [f"Python {platform.python_version()}", f"NumPy {np.__version__}", f"Numba {numba.__version__}"]
    try:
        vers.append(f"jax {metadata.version('jax')}")
    except metadata.PackageNotFoundError:
        vers.append("jax not installed")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{platform.machine()}, {os.cpu_count()} cores ({CORES}), load average {load}; " + ", ".join(vers)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("numpy")]
    keys = [("py", "zymo (Python)"), ("nb", "zymo (Numba)"), ("kn", "zymo (kernels)"),
            ("kr", "zymo (kernels, sums reordered)"), ("jax", "JAX jit(grad)")]
    fig, ax = plt.subplots(figsize=(14, 4.8))
    width = 0.8 / len(keys)
    for j, (key, label) in enumerate(keys):
        vals = [r.get(key, math.nan) / r["numpy"] for r in rows]
        ax.bar(np.arange(len(rows)) + j * width, vals, width, label=label)
    ax.set_yscale("log")
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xticks(np.arange(len(rows)) + 0.4 - width / 2, [r["name"] for r in rows], rotation=60, ha="right")
    ax.set_ylabel("gradient time / NumPy primal (log)")
    ax.set_title("Gradient time relative to the NumPy primal, kernels (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def write(rows, opts, cmd):
    docs = HERE.parent / "docs"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sizes = "the small sizes (`--quick`)" if opts.quick else "the full sizes"
    refused = [r for r in rows if r.get("status", "").startswith("zymo refuses")]
    nb_refused = [r for r in rows if "numba_refusal" in r and not r["numba_refusal"].startswith("the Numba compile")]
    nb_slow = [r for r in rows if r.get("numba_refusal", "").startswith("the Numba compile")]
    mism = [r for r in rows if "MISMATCH" in r.get("status", "")]
    text = [
        "# zymo on real kernels (issue 32, item 6)",
        "",
        f"Run: {now}, `{cmd}`, at {sizes}. Machine: {machine()}.",
        "",
        "**Caveat:** a shared 2-core machine, other jobs running (see the load average): times can be off by "
        "2× or more and are not for comparison with the other tables; the quiet-machine run replaces this one."
        if opts.quick else
        "**Caveat:** check the load average above before comparing numbers between runs.",
        "",
        "Kernels: `benchmarks/kernels.py` (as users write them: loops with in-place updates, PolyBench's loop "
        "nests translated line by line; `style` says where slices or whole-array NumPy are used instead). "
        "JAX: `jax.jit(jax.grad(port))` of the functional ports in `benchmarks/kernels_jax.py`. "
        "Every gradient is checked before timing (the `checks` column): zymo (Python backend) against "
        "central finite differences along 3 random directions, zymo (Numba) and JAX against zymo (Python), "
        f"all at the small size (relative errors; tolerances {FD_TOL:g} and {AGREE_TOL:g}), and again at the "
        "timed size. Times: medians after a warm-up call; the inputs a primal overwrites are restored before "
        "each call in every column (the restore is inside the time). First call (at the timed size): "
        "zymo (Python) after `zymo.cache.cache_clear()` with an empty disk cache (its whole pipeline); zymo "
        "(Numba, the whole program compiled) and zymo (kernels: `numba=\"kernels\"`, the loop nests that do "
        "scalar work compiled as small Numba kernels, the rest run as NumPy calls) and zymo (kernels, sums reordered: "
        "the same with `zymo.config.set_reassociate(True)`, its compiled loops free to add in any order as XLA and "
        "BLAS do, checked against zymo (Python) with the same tolerance as JAX) each in a new process, Numba "
        "loaded and set up first, with an empty disk cache (zymo's pipeline "
        f"and Numba's compile; stopped after {opts.numba_timeout:.0f} s); JAX: trace and XLA compile. "
        "Peak memory: tracemalloc during one call "
        "(NumPy's allocations; Numba's and XLA's are not seen). Linear algebra sizes: `n` (the matrices are "
        "n×n or a few rows/columns more, see `kernels.py`); covariance/correlation: n points of n-2 features.",
        "",
        table(rows),
        "",
        summary(rows),
        "",
        f"Refused by zymo: {len(refused)} of {len(rows)}"
        + ("".join(f"\n- `{r['name']}`: {r['status'][len('zymo refuses: '):]}" for r in refused) or "."),
        "",
        f"Refused by zymo's Numba backend: {len(nb_refused)}"
        + ("".join(f"\n- `{r['name']}`: {r['numba_refusal']}" for r in nb_refused) or "."),
        "",
        f"zymo's Numba gradient not compiled within {opts.numba_timeout:.0f} s: {len(nb_slow)}"
        + ("".join(f"\n- `{r['name']}`" for r in nb_slow) or "."),
        "",
        f"Gradients that disagree: {len(mism)}" + ("".join(f"\n- `{r['name']}`: {r['status']}" for r in mism) or "."),
        "",
    ]
    path = docs / "benchmarks_kernels.md"
    png = docs / "benchmarks_kernels.png"
    try:
        plot(rows, png)
        text.append("![gradient time relative to the NumPy primal](benchmarks_kernels.png)\n")
    except ImportError:
        print("\nmatplotlib is not installed: no plot")
    path.write_text("\n".join(text))
    print(f"\nwrote {path}")


def _compile_zymo():
    """Python's bytecode of zymo's modules written once (`compileall`), as installing a package
    does, so that the new processes timing first calls load it rather than compile the modules
    zymo imports at a first call from source (about 0.25 s on this machine, whose environment
    sets PYTHONDONTWRITEBYTECODE)."""
    import subprocess

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(zymo.__file__).parent)], env=env, check=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--only", default="", help="comma-separated kernel names")
    ap.add_argument("--no-jax", action="store_true", help="leave JAX out even when it is installed")
    ap.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks_kernels.{md,png}")
    ap.add_argument("--numba-timeout", type=float, default=900.0,
                    help="seconds allowed to the first call (compile) of zymo's Numba gradient (default 900)")
    ap.add_argument("--json", metavar="PATH", help="also write the rows (every measurement and check) as JSON")
    ap.add_argument("--all-cores", action="store_true",
                    help="do not pin the run to one core (the default pins it and asks each library for one thread)")
    ap.add_argument("--numba-child", help=argparse.SUPPRESS)
    ap.add_argument("--child-size", help=argparse.SUPPRESS)
    ap.add_argument("--child-backend", default="numba", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.numba_child:
        return numba_child(opts.numba_child, opts.child_size, opts.child_backend)
    os.environ.pop("ZYMO_REASSOCIATE", None)  # every column but the reordered one is zymo's exact default
    names = [n for n in KERNELS if not opts.only or n in opts.only.split(",")]
    unknown = set(opts.only.split(",")) - set(KERNELS) - {""}
    if unknown:
        raise SystemExit(f"unknown kernels: {', '.join(sorted(unknown))}")
    use_jax = not opts.no_jax and jax_available()
    if not use_jax:
        print("JAX is not installed (pip install 'jax[cpu]') or --no-jax: no JAX columns")
    import numba

    numba.njit(lambda a: a + 1)(1)  # Numba's one-time set-up, not charged to the first kernel
    _compile_zymo()
    rows = []
    for name in names:
        k = KERNELS[name]
        size = k.small if opts.quick else k.full
        print(f"{name} ({describe(k.dims, size)})", flush=True)
        rows.append(bench(k, size, use_jax, lambda s: print(s, flush=True), opts.numba_timeout))
    print("\n" + table(rows))
    print("\n" + summary(rows))
    if opts.json:
        import json

        Path(opts.json).write_text(json.dumps(rows, indent=1, default=str))
    if not opts.no_write:
        given = argv if argv is not None else sys.argv[1:]
        cmd = "python benchmarks/run_kernels.py" + "".join(f" {a}" for a in given)
        write(rows, opts, cmd)


if __name__ == "__main__":
    main()
