"""Facts about the written program that later stages rely on.

Contract: once `Reverse.run` has written the program, these say what its names hold:
`shadow_roots` and `same_shape` (`fuse_facts`: a `ShadowFacts`, for `codegen/fuse.py`),
`zero_shadows` (the shadows that are zeros at entry), `float_adjoints`, `int_names` and
`nonneg_facts` (for the Numba backend, `codegen/numba/`), `memory_facts` (`transform/memory.py`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...ir import types as T
from ...ir.core import Value
from ..memory import MemoryFacts, memory_facts
from .dead import DeadPrimal


def never_same(a: str, b: str) -> bool:
    """The `same_shape` of a program nothing is known of: no two names hold one shape."""
    return False


@dataclass(frozen=True)
class ShadowFacts:
    """What reverse mode knows of the shadows of its program, for `codegen/fuse.py` (whose
    contract says how it uses them)."""

    roots: dict  # shadow or adjoint name -> the memory roots it may point into (None: unknown)
    zero: frozenset = frozenset()  # shadows that are zeros when the program starts
    same_shape: Callable[[str, str], bool] = never_same  # two shadow names hold arrays of one shape


class ExportedFacts(DeadPrimal):
    def float_adjoints(self) -> frozenset[str]:
        """The names that hold only adjoints of floats (never a shadow): Numba's in-place
        elementwise statements (`numba_.elementwise_statements`) pass them over."""
        return frozenset(self.adjoint_names["float"] - self.adjoint_names["memory"])

    def nonneg_facts(self) -> tuple[frozenset[str], frozenset[str]]:
        """(The caches that are arrays, their entry counters): a counter indexes its cache at
        entries `0 ..` only, never negative (`numba_.nonneg_indices`)."""
        return frozenset(self.buffers), frozenset(self.counters)

    def int_names(self) -> frozenset[str]:
        """Names the program starts at 0 that only ever hold ints: the caches' entry counters
        (`_k_... = 0`, then `+= 1` and `-= 1`) and the extents of arrays the adjoint sweep
        allocates (`_shape_..._0 = 0`, then `= a.shape[0]`). The Numba backend declares them
        `intp` (`codegen/numba_.compile_numba`)."""
        return frozenset(self.ints)

    def shadow_roots(self) -> dict[str, frozenset | None]:
        """Every name the program gives a shadow or an adjoint, with the memory roots it may
        point into (`codegen/fuse.py` merges accumulations by these facts): an array or list
        shadow mirrors its primal's roots (None where they are unknown), a float adjoint points
        into no memory (an empty set). Names not listed (primal values, copies, caches) never
        refer to shadow memory."""
        out: dict[str, frozenset | None] = {}
        for name, v in self._shadow_values().items():
            if v is not None and not T.is_memory(v.type):
                out[name] = frozenset()
            else:
                out[name] = (self.act.roots.get(v.id) if v is not None else None) or None
        return out

    def _shadow_values(self) -> dict[str, Value | None]:
        """Every shadow or adjoint name (each batch lane's), with the value it belongs to."""
        if self.by_name is None:
            self.by_name = {name: self.values.get(vid) for (vid, role), name in self.namer.values.items()
                             if role == "d" or role.startswith("d#")}
        return self.by_name

    def memory_facts(self) -> MemoryFacts:
        """The memory of every array name of the program (`transform/memory.py`)."""
        copies = [self.namer(self.values[vid]) for vid in self.why if not self._cached(self.values[vid])]
        return memory_facts(self.namer, self.act, self.values, self.buffers, self.counters, copies)

    def fuse_facts(self) -> ShadowFacts:
        """What `codegen/fuse.py` may rely on about this program's shadows."""
        return ShadowFacts(self.shadow_roots(), self.zero_shadows(), self.same_shape)

    def same_shape(self, a: str, b: str) -> bool:
        """Whether shadow names `a` (a parameter's) and `b` hold arrays of one shape: never a
        one-number adjoint (`_uniform`), and for a deferred temporary's adjoint the shape it
        keeps (`_adjoint_shape`). Equal sizes of two parameters count under a guard."""
        va, vb = self._shadow_values().get(a), self._shadow_values().get(b)
        if va is None or vb is None or not (isinstance(va.type, T.Array) and isinstance(vb.type, T.Array)):
            return False
        if va.id in self.deferred or self._uniform(va) or self._uniform(vb):
            return False
        return self.extents.fits(va, self._adjoint_shape(vb))

    def zero_shadows(self) -> frozenset:
        """The names of the shadows that are zeros when the program starts: those of the
        parameters in `internal` (`Const` memory that receives active data, whose shadow zymo
        allocates and zeroes for every call); none in split mode, where the reverse runs after
        a forward sweep of its own."""
        if self.split:
            return frozenset()
        out = set()
        for k in self.internal:
            p = self.fn.params[k]
            if T.is_memory(p.type) and self.act.is_active(p):
                for _ in self.namer.lanes():
                    out.add(self.namer.d(p))
        return frozenset(out)
