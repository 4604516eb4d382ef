"""Helpers of the Numba tests: a fresh cache directory per module, the compiled derivatives
of a function, and the sources the Numba backend compiles."""
import contextlib
import sys

import pytest

import zymo
import zymo.cache
from zymo.frontend.source import unwrap


@pytest.fixture(scope="module", autouse=True)
def private_cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("zymo_cache")
        mp.setenv("ZYMO_CACHE_DIR", str(path))
        yield path


def numba_entries(f, split=False):
    """The compiled derivatives of `f` (split mode's, or the others) that run under Numba."""
    return [c for key, cs in zymo.cache.COMPILED.items() for c in cs
            if key[0][0] is unwrap(f) and key[2] == split and c.backend != "python"]


@contextlib.contextmanager
def numba_sources():
    """The sources the Numba backend compiles while the block runs (a list, filled in). The
    block runs with zymo's caches empty (memory, and an empty disk cache of its own): a program
    an earlier run of the suite left in the disk cache (`codegen/memo.py` keeps the rewritten
    sources there too) would otherwise be loaded, not written again."""
    import tempfile

    from zymo.codegen.numba import backend as numba_

    sources, real = [], numba_.numba_source

    def keep(src, *a, **kw):
        out = real(src, *a, **kw)
        sources.append(out)
        return out
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory(prefix="zymo-sources-") as fresh:
        mp.setattr(numba_, "numba_source", keep)
        mp.setenv("ZYMO_CACHE_DIR", fresh)
        zymo.cache.cache_clear()
        before = {m for m in sys.modules if m.startswith("zymo_generated_")}
        try:
            yield sources
        finally:  # nothing loaded from the directory removed stays in use
            zymo.cache.cache_clear()
            for m in [m for m in sys.modules if m.startswith("zymo_generated_") and m not in before]:
                del sys.modules[m]
