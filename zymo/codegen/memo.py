"""A disk memo of the codegen steps that are pure functions of text: a new process that finds
a derivative's compiled kernels in the disk cache skips them too.

Contract: `memo(step, parts, compute)` returns what `compute()` returns (JSON data: strings,
numbers, lists, dicts with string keys). The value is stored in
`<cache dir>/codegen/<digest>.json`, the digest hashing `step`, `parts` and a stamp of the
code that computes it; a later call with equal `step` and `parts`, in this process or another,
reads the stored value instead of computing it. `parts` are JSON data, sets and dataclasses
(written in a canonical form: sets sorted, dataclasses as their fields), and must hold every
input of `compute`: the step is a pure function of them and of zymo's code. The stamp hashes,
by content, every module of `zymo/codegen/` and `zymo/runtime/` (the code that rewrites and
outlines programs, and what the programs call), `zymo/pipeline.py` (which chains the outlining
passes), and the Python, NumPy and Numba versions: an
edit of that code makes new digests. A file that cannot be read, parsed or written is passed
over (the step is computed). The memo is used by the "kernels" backend's outlining
(`pipeline._with_kernels`) and by the Numba rewrite of a compiled module
(`numba/backend.compile_numba`): about 0.2 s of a first call from the disk cache (cholesky's
gradient at n=60), which otherwise redoes them before loading the compiled kernels.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_STAMP: list[str] = []


def memo(step: str, parts: Any, compute: Callable[[], Any]) -> Any:
    """`compute()`, or the value stored for equal `step` and `parts` (module contract)."""
    from .numba.backend import cache_dir

    key = json.dumps([_stamp(), step, _canonical(parts)], separators=(",", ":"))
    path = cache_dir() / "codegen" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"
    try:
        stored = json.loads(path.read_text())
        if stored["key"] == key:  # a digest collision is not a hit
            return stored["value"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    value = compute()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "value": value}))
        os.replace(tmp, path)  # atomic: a concurrent process reads the whole file or none
    except OSError:
        pass
    return value


def _canonical(x: Any) -> Any:
    if isinstance(x, (set, frozenset)):
        return sorted((_canonical(v) for v in x), key=repr)
    if isinstance(x, dict):
        return sorted(([str(k), _canonical(v)] for k, v in x.items()), key=lambda kv: kv[0])
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [type(x).__name__, _canonical({f.name: getattr(x, f.name) for f in dataclasses.fields(x)})]
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    raise TypeError(f"memo: {type(x).__name__} is not a canonical part")


def _stamp() -> str:
    if not _STAMP:
        import numba
        import numpy

        h = hashlib.sha256()
        here = Path(__file__).resolve().parent
        for path in (sorted(here.rglob("*.py")) + sorted((here.parent / "runtime").rglob("*.py"))
                     + [here.parent / "pipeline.py"]):  # `pipeline._with_kernels` runs the outlining passes
            h.update(str(path.relative_to(here.parent)).encode())
            h.update(path.read_bytes())
        h.update(f"{sys.version}|{numpy.__version__}|{numba.__version__}".encode())
        _STAMP.append(h.hexdigest())
    return _STAMP[0]
