"""Golden programs: whole generated derivative programs (Python backend) compared with the
printed programs in `tests/golden/<name>.txt`.

One program per situation the transforms handle differently: forward mode, reverse mode, split
mode's two sweeps, batch mode, a loop whose adjoint needs a cache, an in-place store that
overwrites what the adjoint reads, a branch in a loop, a `while` loop, `out=` and a
checkpointed loop. A change to generated code shows up here as a diff of the whole program;
when the change is intended, rewrite the files with

    ZYMO_UPDATE_GOLDEN=1 python -m pytest -n 0 tests/codegen/test_golden.py

and read the diff (`git diff tests/golden`) before committing it.
"""
import difflib
import os
import re
from pathlib import Path

import numpy as np
import pytest
from golden_programs import clipped, damped, diffusion, energy, halve, layer, overwrite, relax

import zymo
from zymo import Active, BatchDuplicated, Const, Duplicated, Forward, Reverse, ReverseSplitWithPrimal, ReverseWithPrimal

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("ZYMO_UPDATE_GOLDEN") == "1"


def _arr(*shape):
    return np.linspace(0.1, 0.9, int(np.prod(shape))).reshape(shape)


PROGRAMS = {
    "forward_scalar": lambda: (Forward, damped, Duplicated, Duplicated(0.3, 1.0), 0.7),
    "reverse_arrays": lambda: (Reverse, energy, Active, Duplicated(_arr(4), np.zeros(4)), _arr(4)),
    "reverse_with_primal_scalar": lambda: (ReverseWithPrimal, damped, Active, Active(0.3), Active(0.7)),
    "split_arrays": lambda: (ReverseSplitWithPrimal, energy, Active, Duplicated(_arr(4), np.zeros(4)), _arr(4)),
    "batch_forward": lambda: (Forward, energy, BatchDuplicated,
                              BatchDuplicated(_arr(4), (np.ones(4), _arr(4))), Const(_arr(4))),
    "loop_cache": lambda: (Reverse, relax, Active, Duplicated(_arr(5), np.zeros(5)), 3),
    "in_place_store": lambda: (Reverse, overwrite, Active, Duplicated(_arr(5), np.zeros(5)),
                               Duplicated(_arr(5), np.zeros(5))),
    "branch_in_loop": lambda: (Reverse, clipped, Active, Duplicated(_arr(5), np.zeros(5)), Active(0.5)),
    "while_loop": lambda: (Reverse, halve, Active, Active(2.0), 0.1),
    "out_calls": lambda: (Reverse, layer, Active, Duplicated(_arr(3, 4), np.zeros((3, 4))),
                          Duplicated(_arr(4), np.zeros(4)), Duplicated(np.zeros(3), np.zeros(3))),
    "checkpointed_loop": lambda: (Reverse, diffusion, Active, Duplicated(_arr(6), np.zeros(6)), 4),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_generated_program_matches_golden(name):
    mode, f, ret, *args = PROGRAMS[name]()
    # checkpointed loops name their plan after the object's id: the one part that changes between runs
    got = re.sub(r"_ck\d+_", "_ck#_", zymo.generated_code(mode, f, ret, *args))
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.write_text(got)
        return
    assert path.exists(), f"no golden program {path}: run with ZYMO_UPDATE_GOLDEN=1 to write it"
    want = path.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            f"tests/golden/{name}.txt", "generated"))
        pytest.fail(f"the generated program differs from tests/golden/{name}.txt "
                    f"(ZYMO_UPDATE_GOLDEN=1 rewrites it if the change is intended):\n{diff}", pytrace=False)
