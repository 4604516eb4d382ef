"""`import zymo` stays light: SciPy (0.5-2 s to import) is imported only when a differentiated
function calls into it (`rules.registry.LAZY`)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest


def _run(code: str) -> str:
    """Run `code` in a new process, from a file (zymo reads the source of what it differentiates)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "script.py"
        path.write_text(textwrap.dedent(code))
        out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
def test_import_leaves_scipy_alone():
    assert _run("""
        import sys
        import zymo
        print('scipy' in sys.modules)
    """).strip() == "False"


@pytest.mark.slow
def test_a_scipy_signal_rule_is_found_when_called():
    got = _run("""
        import numpy as np
        import scipy.signal
        from zymo.rules import rule_for_callable
        print(rule_for_callable(scipy.signal.convolve), rule_for_callable(scipy.signal.correlate))
    """).split()
    assert got == ["scipy.signal.convolve", "scipy.signal.correlate"]


def test_scipy_rules_load_when_a_function_uses_scipy():
    got = _run("""
        import sys
        import numpy as np
        import zymo
        from zymo import Reverse
        assert 'scipy' not in sys.modules
        import scipy.special, scipy.linalg

        def f(x):
            return np.sum(scipy.special.gammaln(x)) + np.sum(scipy.linalg.expm(np.outer(x, x) * 0.1))

        x = np.array([1.5, 2.5])
        (g,) = zymo.gradient(Reverse, f, x)
        h = 1e-6
        fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
        print(np.allclose(g, fd, rtol=1e-6))
    """)
    assert got.strip() == "True"


def test_numpy_rules_that_need_scipy_load_when_met():
    got = _run("""
        import numpy as np
        from zymo.rules import rule_for_callable
        print(rule_for_callable(np.sinc), rule_for_callable(np.i0))
    """).split()
    assert got == ["numpy.sinc", "numpy.i0"]


def test_differentiating_numpy_code_leaves_scipy_alone():
    assert _run("""
        import sys
        import numpy as np
        import zymo
        from zymo import Reverse

        def f(x):
            s = 0.0
            for i in range(x.shape[0]):
                s += np.sin(x[i]) * x[i]
            return s + np.sum(np.exp(x) / (1.0 + x * x))

        zymo.gradient(Reverse, f, np.array([0.5, 1.5]))
        print('scipy' in sys.modules)
    """).strip() == "False"
