"""Test settings: the IR verifier runs after every lowering; hypothesis is deterministic; the
suite's Numba cache is its own; Numba compiles at LLVM's lowest optimization level.

Generated modules and Numba's machine code go to `ZYMO_CACHE_DIR`: unless the user set it, the
suite uses `zymo-numba` under pytest's cache directory (`.pytest_cache/d/`, kept between runs, so
a second run loads instead of compiling), or under the system's temporary directory when the
cache provider is off (`-p no:cacheprovider`). It is one directory for the whole session,
xdist workers included: the controller sets the variable before the workers start and they
inherit it. Sharing is safe: zymo names each file by a hash of its source and of the versions
that compiled it, and locks a module's cache while compiling it (`zymo/codegen/numba/backend.py`).

`NUMBA_OPT=0` (unless the user set it): the suite checks what compiled code computes, not how
fast, and LLVM's optimizations (and code generation at a level above 0) are about a third of the
suite's time, a half of a small program's compile; zymo asks for no `fastmath` but `reassoc`
where it reassociates on purpose, so the passes may not change results beyond round-off. At
level 0 Numba leaves dead loads of dynamic globals in some of its own implementations
(`argsort`'s merge sort), which makes those programs uncacheable: a warning, which the tests
that turn warnings into errors allow (`tests/codegen/test_numba_sorting_stats.py`). Tests of
what LLVM makes of the code (vector instructions, loop metadata) raise the level for their
own compiles. `tests/test_suite_settings.py` compiles a derivative at Numba's default level too and compares.

Order: the files in `LONGEST_FIRST` run first, longest first, then the others in collection
order. With `--dist loadfile` (pyproject's addopts) each xdist worker takes one whole file at a
time, so the long Numba-compile files start at once and the many short files even out the end
(a long file started last kept one worker busy while the other idled).
"""
import getpass
import os
import tempfile
from pathlib import Path

os.environ.setdefault("ZYMO_CHECK_IR", "1")
os.environ.setdefault("NUMBA_OPT", "0")  # read when Numba is first imported, below

try:
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
    settings.load_profile("ci")
except ImportError:  # pragma: no cover
    pass

import zymo.rules

zymo.rules.load_all()  # the lazily registered rules too (`rules.registry.LAZY`): the rule tests list them all


def pytest_configure(config):
    if os.environ.get("ZYMO_CACHE_DIR"):  # the user's choice (or, in an xdist worker, the controller's)
        return
    cache = getattr(config, "cache", None)
    if cache is not None:
        path = Path(cache.mkdir("zymo-numba"))
    else:
        path = Path(tempfile.gettempdir()) / f"zymo-numba-tests-{getpass.getuser()}"
    os.environ["ZYMO_CACHE_DIR"] = str(path)
    os.environ["ZYMO_TESTS_OWN_CACHE"] = "1"  # read by tests/test_suite_settings.py


# the longest files, with their share of the suite's test time in a fresh-clone run on 2 cores
# (cold Numba cache; `--durations=0` summed per file, 2026-11-27, before the rule cases got
# about 35% cheaper), longest first: a stale entry only costs time, never a check
LONGEST_FIRST = (
    "codegen/test_numba_elementwise.py",  # 16%
    "codegen/test_numba.py",  # 15%
    "codegen/test_numba_sorting_stats.py",  # 9%
    "rules/test_rule_cases.py",  # 12% (6287 cases), now about 8%
    "codegen/test_numba_rules.py",  # 7%
    "rules/test_views_shapes.py",  # 5%
    "rules/test_complex.py",  # 4%
    "codegen/test_numba_inline.py",  # 3%
    "frontend/test_containers.py",  # 2%
    "interface/test_interface_scenarios.py",  # 2%
    "codegen/test_runtime_twins.py",  # 2%
    "programs/test_random_programs.py",  # 2%
    "programs/test_benchmark_kernels.py",  # 2%
)


def pytest_collection_modifyitems(config, items):
    rank = {Path(__file__).parent / name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.path), len(rank)))  # stable: the rest keep their order
