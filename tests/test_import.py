"""`import zymo` stays light: packages slow to import (scipy.signal) are imported only when a
differentiated function calls into them (`rules.registry.LAZY`)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.slow
def test_import_leaves_scipy_signal_alone():
    assert _run("""
        import sys
        import zymo
        print('scipy.signal' in sys.modules)
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
