"""The suite's own settings (tests/conftest.py): its Numba cache is not the user's, and is one
directory for every xdist worker."""
import os
from pathlib import Path

import pytest

from zymo.codegen.numba.backend import cache_dir


def test_the_suite_compiles_into_its_own_cache_directory():
    if not os.environ.get("ZYMO_TESTS_OWN_CACHE"):
        pytest.skip("ZYMO_CACHE_DIR was set by the user: the suite uses it")
    got = cache_dir()
    assert got == Path(os.environ["ZYMO_CACHE_DIR"])
    assert got != Path.home() / ".cache" / "zymo"
    assert got.name.startswith("zymo-numba")
    # one directory for the session: not a worker's own temporary directory
    assert "popen-gw" not in str(got)
