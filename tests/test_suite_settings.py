"""The suite's own settings (tests/conftest.py): its Numba cache is not the user's, and is one
directory for every xdist worker; Numba compiles without LLVM's optimizations, and a
derivative compiled at the default level agrees."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
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


_STENCIL = textwrap.dedent("""
    import json, sys
    import numpy as np
    import zymo
    from zymo import Reverse

    def smooth(u, steps):
        for _ in range(steps):
            for i in range(1, len(u) - 1):
                u[i] = u[i] + 0.25 * (u[i - 1] - 2.0 * u[i] + u[i + 1]) - 0.01 * u[i] ** 3
        return np.sum(u * u)

    u = np.linspace(-1.0, 1.0, 16) ** 2
    g = zymo.gradient(Reverse, smooth, u, zymo.Const(5), numba=True)[0]
    import numba
    print(json.dumps({"opt": numba.config.OPT, "grad": list(g)}))
""")


def _gradient_at(opt, cache):
    script = cache.parent / "stencil.py"  # zymo reads the function's source from its file
    script.write_text(_STENCIL)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_OPT"}
    if opt is not None:
        env["NUMBA_OPT"] = str(opt)
    env["ZYMO_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_suite_compiles_at_a_low_optimization_level_and_the_default_level_agrees(tmp_path):
    if os.environ.get("NUMBA_OPT") != "0":
        pytest.skip("NUMBA_OPT was set by the user")
    import numba

    assert numba.config.OPT == 0
    plain, default = _gradient_at(0, tmp_path / "o0"), _gradient_at(None, tmp_path / "o3")
    assert plain["opt"] == 0 and default["opt"] == 3
    np.testing.assert_allclose(default["grad"], plain["grad"], rtol=1e-13, atol=1e-15)
    assert np.abs(plain["grad"]).max() > 0.1  # a gradient, not zeros
