"""The Numba backend: generated derivative source compiled with `numba.njit`, cached on disk.

Contract: `compile_numba(src, names, what, facts)` returns a list whose entries
(one per name) are Numba dispatchers of the functions `src` defines, with `np` bound to
`np_shim` and `_rt` to `twins` (after the rewrites of `rewrites.numba_source`),
and the names the transform says hold only ints declared `intp`, compiled by the pipeline of
`pipeline.py` (Numba's own, without SSA reconstruction where that types the program the same).
The source is written once to a module file named by a hash of the source, of zymo's runtime and
shim sources and of the Python, NumPy and Numba versions, under `cache_dir()` (`ZYMO_CACHE_DIR`,
else `~/.cache/zymo`); the dispatchers use Numba's `cache=True`, so a second process that generates the same source
loads the machine code from disk instead of compiling. A changed user function generates
different source, hence a different file: a stale entry can never be reused. When the
directory cannot be written the program is compiled in memory only.
Numba's cache index is not safe for concurrent writers: two processes that compile one
module for two signatures at once may both store their code under the same data file, and
a later load takes whichever was written last, for either signature (wrong machine code,
wrong numbers). Every compile of a dispatcher (its `_compile_for_args`: cache load,
compile, cache save) therefore holds an exclusive lock on `<module>.lock` (`fcntl.flock`;
where that is missing, as on Windows, nothing is locked).
Numba also names the machine code of each compiled function (an array expression's kernel
included) by its qualified name, which for array expressions holds an object address, and a
per-process counter. Two processes compiling two different modules can produce the same
name, and a process that then loads both from the cache links the second module's calls to
the first one's kernel (wrong numbers). Before each compile the counter is moved forward by a
random amount (`_fresh_numba_ids`), so names from different processes do not meet.

`explain(exc, primal, args)` turns a Numba compile failure into a `ZymoNumbaError`:
when Numba cannot compile the primal itself the error names the user's file, line and
construct (from Numba's own diagnosis of the primal); otherwise it names the line of
generated code Numba refused.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import Loc, ZymoSourceError
from ..index_checks import IndicesUnproven
from ..python import paused_collector
from .rewrites import SourceFacts, numba_source

_HEADER = '''"""zymo: {what}. Generated code; the file name is the hash of its contents."""
import math

import numba

from zymo.codegen.numba import np_shim as np
from zymo.codegen.numba import twins as _rt
from zymo.codegen.numba.pipeline import Compiler

'''


@contextlib.contextmanager
def quick_compile():
    """Compile generated code with Numba's short slice-assignment error message.

    Numba lowers every array-to-slice assignment (`out[:n] = buf`, a stacked cache's
    `_cache[k] = row`) with a shape-mismatch error whose CPU message formats both shapes
    as strings; that formatter is a compile of its own per pair of ranks, the largest single
    item of a derivative's first compile (`docs/decisions/0009`). While this context is active the
    generic-target message ("cannot assign slice from input of different size") is used
    instead: the error is still raised on a mismatch, only its text is shorter. Numba's
    messages are also built without colours meanwhile (`_plain_messages`). The swaps are
    scoped to zymo's own first calls, so the user's `njit` code keeps Numba's messages.
    Python's cyclic garbage collector is paused meanwhile (`python.paused_collector`).
    """
    with _QUICK_LOCK:  # nested or concurrent uses: the first one in swaps, the last one out restores
        if not _QUICK:
            swaps = _quick_swaps()
            _QUICK.append([(owner, attr, getattr(owner, attr)) for owner, attr, _ in swaps])
            for owner, attr, value in swaps:
                setattr(owner, attr, value)
        _QUICK.append(None)
    try:
        with paused_collector():
            yield
    finally:
        with _QUICK_LOCK:
            _QUICK.pop()
            if len(_QUICK) == 1:
                for owner, attr, value in _QUICK.pop():
                    setattr(owner, attr, value)


def _quick_swaps() -> list[tuple[object, str, object]]:
    """(module, attribute, value while `quick_compile` is active): the short slice error, and the
    plain colour scheme wherever Numba keeps one (`errors._termcolor_inst`, and the copies its
    modules took at import: `types.functions` marks up every overload rejected while typing)."""
    import importlib

    from numba.core import errors
    from numba.np import arrayobj

    from .twins import raise_shape_mismatch

    plain = _plain_messages()
    swaps: list[tuple[object, str, object]] = [(arrayobj, "raise_with_shape_context", raise_shape_mismatch),
                                               (errors, "_termcolor_inst", plain)]
    for name in ("numba.core.types.functions", "numba.core.typeinfer", "numba.core.ir",
                 "numba.core.compiler_machinery", "numba.core.typing.typeof"):
        module = importlib.import_module(name)
        if hasattr(module, "_termcolor"):
            swaps.append((module, "_termcolor", plain))
    return swaps


def _plain_messages():
    """Numba's error-message markup without colours. Numba's typing builds a message for each
    overload it tries and rejects (thousands per derivative); with colorama installed, each
    is marked up through colorama's `init`/`deinit` of the terminal, a visible part of a
    first compile (`docs/decisions/0009`). zymo reports its own errors, so its compiles skip that."""
    from numba.core import errors

    class Plain(errors._DummyColorScheme):
        def _same(self, msg):
            return msg

        code = errmsg = filename = indicate = highlight = reset = _same
    return Plain()


_QUICK: list = []  # [the values swapped out (`_quick_swaps`), then one entry per active quick_compile]
_QUICK_LOCK = threading.Lock()


class ZymoNumbaError(ZymoSourceError):
    """Numba cannot compile a derivative (or the primal it comes from)."""


def cache_dir() -> Path:
    return Path(os.environ.get("ZYMO_CACHE_DIR") or Path.home() / ".cache" / "zymo")


def _stamp() -> str:
    """What else the generated module's behaviour depends on: zymo's runtime and versions."""
    import numba
    import numpy

    from . import vecmath

    h = hashlib.sha256()
    # every Numba shim, twin, intrinsic and pass (codegen/numba/, this module, which writes, locks
    # and names the modules, among them) and every runtime module generated code calls
    # (zymo/runtime/), found by name so that a new one is not missed
    here = Path(__file__).resolve().parent
    runtime = here.parent.parent / "runtime"
    for path in sorted(here.rglob("*.py")) + sorted(runtime.glob("*.py")):
        h.update(path.read_bytes())
    h.update(f"{sys.version}|{numpy.__version__}|{numba.__version__}|{vecmath.signature()}".encode())
    return h.hexdigest()


_STAMP: list[str] = []

def tape_in(inner: tuple) -> tuple:
    """The tape a compiled forward half takes back (`tape=`): its lists replaced by None.
    `fresh_lists` makes new ones, so only the buffers are read; and Numba's dispatcher types a
    tuple that holds typed lists in Python, far slower than one of buffers
    (`docs/decisions/0010`)."""
    from numba.typed import List

    return tuple(None if isinstance(item, List) else item for item in inner)


_NO_FACTS = SourceFacts()

def compile_numba(src: str, names: list[str], what: str, facts: SourceFacts = _NO_FACTS,
                  parallel: frozenset[str] = frozenset(), reassociate: bool = False,
                  exempt: frozenset[str] = frozenset(), bounded: bool = False,
                  fallback: bool = False) -> list[Callable]:
    """Numba dispatchers of the functions `names` defined by `src` (see the module contract);
    `facts`: what the transform knows about names (`SourceFacts`; `numba_source`), its `ints`
    declared `intp`; `reassociate`: compiled with LLVM's `reassoc` flag alone
    (`config.set_reassociate`: sums in any order; NaNs and infinities as IEEE arithmetic has
    them). Numba types `k = 0` as the literal 0 and widens it to int64 only when it
    meets `k += 1` through a loop; every such widening costs its type inference one more pass
    over the whole function (`docs/decisions/0009`).

    Indices (`codegen/index_checks.py`): each function checks at entry that its element
    indices stay in bounds, and raises `IndicesUnproven` where it cannot tell (`exempt`: the
    program's own caches, which it sizes itself); a function whose indices have no such check
    is compiled with Numba's `boundscheck=True`. `bounded`: every function compiled with
    `boundscheck=True` and no entry check, the version a caller runs after `IndicesUnproven`
    (`fallback`: each function with an entry check is returned wrapped so that it runs that
    version itself; else the caller does, as `outline.Kernel` does), which raises `IndexError`
    where Python would."""
    from ..index_checks import entry_checks
    from ..memo import memo

    source = src
    src = memo("numba_source", [source, facts], lambda: numba_source(source, facts))
    checked: frozenset[str] = frozenset(names)
    guarded: frozenset[str] = frozenset()
    if not bounded:
        rewritten = src
        src, unproven, given = memo("entry_checks", [rewritten, sorted(facts.arrays), sorted(exempt)],
                                    lambda: _with_names(*entry_checks(rewritten, facts.arrays, exempt)))
        checked, guarded = frozenset(unproven), frozenset(given)
    ints = facts.ints
    if not _STAMP:
        _STAMP.append(_stamp())
    typed = "_INTS = {" + ", ".join(f"{k!r}: numba.intp" for k in sorted(ints)) + "}\n"
    fm = ", fastmath={'reassoc'}" if reassociate else ""

    def options(n: str) -> str:
        bc = ", boundscheck=True" if n in checked else ""
        if n in parallel:
            return f"cache=True, locals=_INTS, parallel=True{fm}{bc}"
        return f"cache=True, locals=_INTS, pipeline_class=Compiler, no_cfunc_wrapper=True{fm}{bc}"
    decorators = "".join(f"{n} = numba.njit({options(n)})({n})\n" for n in names)
    digest = hashlib.sha256((_STAMP[0] + src + typed + decorators).encode()).hexdigest()[:24]
    body = _HEADER.format(what=what) + src + "\n" + typed + decorators
    path = _write(digest, names[0], body)
    if path is None:
        out = _in_memory(body, names)
    else:
        modname = f"zymo_generated_{digest}"
        mod = sys.modules.get(modname)
        if mod is None:
            spec = importlib.util.spec_from_file_location(modname, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            for n in names:
                _guard_compiles(getattr(mod, n), path.with_name(path.name + ".lock"))
            sys.modules[modname] = mod
        out = [getattr(mod, n) for n in names]
    if not (fallback and guarded):
        return out
    made = _once(lambda: compile_numba(source, names, what, facts, parallel, reassociate, bounded=True))
    return [_OrBounded(f, k, made) if n in guarded else f for k, (n, f) in enumerate(zip(names, out))]


def _with_names(src: str, *names: frozenset[str]) -> list:
    """`(src, names, ...)` as the disk memo stores values (JSON)."""
    return [src, *(sorted(n) for n in names)]


class _OrBounded:
    """A compiled function, or, for a call whose entry check fails (`IndicesUnproven`, raised
    before the function does anything), the `k`-th of `bounded()`: `IndexError` where Python
    raises it. Anything else it is asked is the dispatcher's (`signatures`, `py_func`, ...)."""

    __slots__ = ("__wrapped__", "k", "bounded")

    def __init__(self, fast: Callable, k: int, bounded: Callable[[], list]):
        self.__wrapped__, self.k, self.bounded = fast, k, bounded

    def __call__(self, *args: Any) -> Any:
        try:
            return self.__wrapped__(*args)
        except IndicesUnproven:
            return self.bounded()[self.k](*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__wrapped__, name)


def _once(make: Callable[[], list]) -> Callable[[], list]:
    """`make()`, made at the first call only (the `boundscheck=True` versions, which most
    programs never need)."""
    made: list = []

    def get() -> list:
        if not made:
            made.append(make())
        return made[0]
    return get


def _fresh_numba_ids() -> None:
    """Move Numba's per-process function counter forward by a random amount (module
    contract): names stay unique within the process (the counter only grows) and differ from
    those another process gives (2**40 possible jumps)."""
    import itertools
    import secrets

    from numba.core.bytecode import FunctionIdentity

    start = next(FunctionIdentity._unique_ids) + 1 + secrets.randbelow(2 ** 40)
    FunctionIdentity._unique_ids = itertools.count(start)


def _guard_compiles(dispatcher: Any, lock_path: Path | None) -> None:
    """Make every compile of `dispatcher` (Numba calls `_compile_for_args` only for a new
    signature) hold an exclusive lock on `lock_path` across processes (module contract; None:
    an in-memory module, no lock), and report every failure of the compile as a Numba error.
    `_compile_for_args` only compiles, so whatever it raises is a compile failure; Numba raises
    a bare `NotImplementedError` for some constructs it types but cannot lower (a ufunc's
    `out=` keyword, `x[...]` of a 0-d array), and a bug in a shim's typing would raise its own
    exception: either would otherwise escape as if the program had raised it.
    Numba's pending-deprecation warning for a reflected list is silenced meanwhile: a Python
    list the user passes (or a list cache) reaches the generated program as one by zymo's
    choice, and the warning would point at a generated file the user never wrote."""
    compile_for_args = dispatcher._compile_for_args

    def compile_reporting(*args: Any, **kws: Any) -> Any:
        import warnings

        from numba.core.errors import NumbaError, NumbaPendingDeprecationWarning, UnsupportedError

        _fresh_numba_ids()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", r"(?s).*type 'reflected list'", NumbaPendingDeprecationWarning)
                return compile_for_args(*args, **kws)
        except NumbaError:
            raise
        except NotImplementedError as exc:
            raise UnsupportedError(f"Numba cannot lower this construct: {exc}") from exc
        except Exception as exc:
            raise UnsupportedError(f"Numba failed to compile this program: {type(exc).__name__}: "
                                   f"{exc or 'no message (a Numba bug or limit)'}") from exc

    try:
        import fcntl
    except ImportError:  # no flock (Windows): Numba's cache is used unlocked
        lock_path = None
    if lock_path is None:
        dispatcher._compile_for_args = compile_reporting
        return

    def locked(*args: Any, **kws: Any) -> Any:
        try:
            fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:
            return compile_reporting(*args, **kws)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            return compile_reporting(*args, **kws)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    dispatcher._compile_for_args = locked


def _write(digest: str, name: str, body: str) -> Path | None:
    d = cache_dir()
    path = d / f"{name}_{digest}.py"
    try:
        if path.exists() and path.read_text() == body:
            return path
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_text(body)
        os.replace(tmp, path)  # atomic: a concurrent process sees the whole file or none
        return path
    except OSError:
        return None


def _in_memory(body: str, names: list[str]) -> list[Callable]:
    body = body.replace("numba.njit(cache=True, ", "numba.njit(")
    ns: dict[str, Any] = {"__name__": "zymo_generated"}
    exec(compile(body, "<zymo numba>", "exec"), ns)
    for n in names:
        _guard_compiles(ns[n], None)
    return [ns[n] for n in names]


# -- diagnosis ---------------------------------------------------------------------------

_LOC = re.compile(r'File "([^"]+)", line (\d+)')


def explain(exc: Exception, primal: Callable, args: tuple) -> ZymoNumbaError:
    """A `ZymoNumbaError` saying why Numba refused, pointing at the user's line if it can."""
    import numba

    first = _first_line(exc)
    name = getattr(primal, "__qualname__", repr(primal))
    reason = _ZYMO_REASON.search(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)))
    try:
        sig = tuple(numba.typeof(a) for a in args)
        numba.njit(primal).compile(sig)
    except Exception as primal_exc:  # Numba cannot compile the user's own code
        loc = _user_loc(primal_exc, primal)
        return ZymoNumbaError(
            f"Numba cannot compile {name}: {_first_line(primal_exc)}", loc,
            why="zymo compiles a derivative with Numba where Numba compiles the code it comes from (and a "
                f"few constructs it does not, 2-d masks among them); the derivative's own error: "
                f"{reason.group(0).rstrip('.') if reason else first}",
            hint="rewrite that construct in Numba's subset, or pass numba=False (or numba='prefer' "
                 "to fall back to Python with a warning)")
    gen = _LOC.findall(str(exc))
    where = f" (generated code line {gen[-1][1]})" if gen else ""
    if reason:  # a shim's own refusal, deep in Numba's message: it says what is missing
        first = f"{reason.group(0).rstrip('.')} ({first})"
    return ZymoNumbaError(
        f"Numba cannot compile zymo's derivative of {name}{where}: {first}",
        why="a derivative helper does not compile with Numba: a gap in zymo's Numba backend",
        hint="pass numba=False (or numba='prefer') to run the derivative as Python, and please report it")


_ZYMO_REASON = re.compile(r"zymo's Numba backend [^\n]*")


def _first_line(exc: Exception) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if not ln.startswith(("Failed in", "During:", "File ")):
            return ln
    if lines:
        return lines[0]
    return f"Numba raised {type(exc).__name__} with no message (a Numba bug or limit)"


def _user_loc(exc: Exception, primal: Callable) -> Loc | None:
    file = os.path.abspath(primal.__code__.co_filename)
    for f, line in _LOC.findall(re.sub(r"\x1b\[[0-9;]*m", "", str(exc))):
        if os.path.abspath(f) == file:  # Numba prints paths relative to the working directory
            return Loc(file, int(line), 0, primal.__name__)
    return None
