"""The memory the array names of a generated program point into: facts for the loop rewrites of
the compiled backends (`codegen/loop_order.py`, `codegen/interchange.py`).

Contract: `memory_facts(namer, act, values, buffers)` returns a `MemoryFacts` for the program
whose names `namer` gave (`transform/naming.py`), `act` being the function's activity analysis
(`analysis/activity.py`: the memory roots of its values) and `values` its values by id; `buffers`
names the caches that are arrays (reverse mode's, allocated by the program), `counters` their
entry counters, `copies` the snapshots taken outside every loop (`name = x.copy()`, each name
one new array, assigned once). `floats`: the names that hold float64 numbers only (a scalar a
loop rewrite may keep in a float64 array, `codegen/distribute.py`). A primal array
points into its value's roots (a parameter's alias class, an allocation); a shadow or tangent
into its primal's roots in shadow memory, which is separate from primal memory (each batch lane
alike); a cache or a snapshot into a block of its own. A name of several values gets the union; one whose
roots are unknown is left out, and so may overlap anything.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..analysis.activity import Activity
from ..ir import types as T
from ..ir.core import Value
from .naming import Namer


@dataclass(frozen=True)
class MemoryFacts:
    """What the program's array names point into, for `codegen/loop_order.py` (whose contract
    says how it uses them). `roots`: a name -> the numbers of the memory blocks it may point
    into (primal memory, shadow memory and caches numbered apart: shadows are separate from
    primal memory); two listed names overlap only where their numbers meet, an unlisted name
    may overlap anything. `wide`: the listed names whose elements are float64 or complex128.
    `ndims`: every name that holds an array, with its dimensions. `counters`: the caches'
    entry counters (`codegen/tape_index.py`); `caches`: the caches that are arrays, each entry
    written once (a push). Plain data (the disk memo of `codegen/memo.py` keys on it)."""

    roots: dict[str, tuple[int, ...]]
    wide: frozenset[str]
    ndims: dict[str, int]
    counters: frozenset[str] = frozenset()
    caches: frozenset[str] = frozenset()
    floats: frozenset[str] = frozenset()  # names whose every value is a float64 number

    def overlap(self, a: str, b: str) -> bool:
        if a == b:
            return True
        ra, rb = self.roots.get(a), self.roots.get(b)
        return ra is None or rb is None or bool(set(ra) & set(rb))

    def listed(self, name: str) -> bool:
        return name in self.roots

    def is_wide(self, name: str) -> bool:
        return name in self.wide

    def is_float(self, name: str) -> bool:
        return name in self.floats

    def with_array(self, name: str, ndim: int) -> MemoryFacts:
        """These facts and array `name` of float64 elements, new memory of its own."""
        block = 1 + max((r for rs in self.roots.values() for r in rs), default=-1)
        return replace(self, roots={**self.roots, name: (block,)}, wide=self.wide | {name},
                       ndims={**self.ndims, name: ndim})


def memory_facts(namer: Namer, act: Activity, values: dict[int, Value], buffers: Iterable[str] = (),
                 counters: Iterable[str] = (), copies: Iterable[str] = ()) -> MemoryFacts:
    """The memory of every array name of the program (module contract)."""
    buffers = frozenset(buffers)
    copies = frozenset(copies) - buffers
    blocks: dict[tuple, int] = {}
    found: dict[str, set | None] = {}
    wide: set[str] = set()
    narrow: set[str] = set()
    for name in sorted(buffers):  # caches that are arrays: allocated by the program
        found[name] = {blocks.setdefault(("cache", name), len(blocks))}
    for name in sorted(copies):  # snapshots: new arrays (`.copy()`), one name each
        found[name] = {blocks.setdefault(("copy", name), len(blocks))}
    for (vid, role), name in sorted(namer.values.items(), key=lambda kv: kv[1]):
        space = "p" if role == "p" else "d" if role.split("#")[0] == "d" else None
        v = values.get(vid)
        if space is None or v is None or not isinstance(v.type, T.Array) or name in buffers or name in copies:
            continue
        roots = act.roots.get(vid)
        if name in found and found[name] is None or not roots:
            found[name] = None
            continue
        mine = found.setdefault(name, set())
        assert mine is not None
        for r in sorted(roots, key=repr):
            mine.add(blocks.setdefault((space, r), len(blocks)))
        (wide if v.type.dtype in ("float64", "complex128") else narrow).add(name)
    known = {n: tuple(sorted(r)) for n, r in found.items() if r is not None}
    return MemoryFacts(known, frozenset(wide - narrow) & frozenset(known), dict(namer.ndims), frozenset(counters),
                       buffers, _float_names(namer, values))


def _float_names(namer: Namer, values: dict[int, Value]) -> frozenset[str]:
    """The names every value (primal or adjoint, any lane) of which is a float64 number."""
    floats: set[str] = set()
    other: set[str] = set()
    for (vid, _role), name in namer.values.items():
        v = values.get(vid)
        (floats if v is not None and v.type == T.Scalar("f64") else other).add(name)
    return frozenset(floats - other)
