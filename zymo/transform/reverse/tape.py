"""The tape plan: how the adjoint sweep gets each value it reads.

Contract: a `TapePlan` holds one `Decision` per (value, role) the adjoint sweep reads (role
"p": the primal value, "d": its shadow), each one of `HOWS` with the reason, and where each
cache is allocated. `plan.TapePlanner._plan_caches` fills it once the adjoint sweep's
reads are known and before the forward sweep (which records the caches) is written; the
forward sweep, the split-mode tape and `report.report` (`zymo.cache_report`) read it, and
`print(plan)` lists it. Two decisions that depend on what the adjoint sweep restores anyway
are kept here as they are taken, once each, when the adjoint sweep closes the block that
defines the value (`recompute`, `cheap_ops`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ir.core import Op, Value

HOWS = {
    "in place": "read where the forward sweep left it (defined outside every loop, or a loop index, or a constant)",
    "recompute": "recomputed by the adjoint sweep from values it has",
    "snapshot": "a copy of an array taken by the forward sweep before a later write may change it",
    "list": "pushed on a list by the forward sweep, popped by the adjoint sweep",
    "stack": "copied into a row of a stacked array buffer",
    "buffer": "stored in a buffer allocated once with the trip counts of its loops",
    "growing buffer": "stored in a buffer that grows geometrically",
}


@dataclass(frozen=True)
class Decision:
    """How the adjoint sweep gets one value it reads (`how`: one of `HOWS`), and why."""
    value: Value
    role: str
    how: str
    reason: str

    def __str__(self) -> str:
        what = "shadow of" if self.role == "d" else "value"
        return f"{what} `{self.value.hint}` ({self.value.type}): {self.how}: {self.reason}"


@dataclass
class TapePlan:
    """Every decision, in the order of `sorted(needed)`, and where the caches are allocated."""
    decisions: list[Decision] = field(default_factory=list)
    # value id -> a number the adjoint sweep recomputes rather than caches (`TapePlanner._remat`)
    recompute: dict[int, bool] = field(default_factory=dict)
    # op id -> the array result of cheap arithmetic recomputed (`TapePlanner._cheap_array`)
    cheap_ops: dict[int, bool] = field(default_factory=dict)
    # op id -> the loop at whose entry a copy of a scalar load's array is taken, the load
    # recomputed from it (None: not so) (`TapePlanner._entry_loop`)
    entry_loads: dict[int, Op | None] = field(default_factory=dict)
    # value id -> a top-level temporary the adjoint sweep recomputes where it reads it
    # (`Needs._top_remat`: a question of the IR alone, answered when first asked)
    top_remat: dict[int, bool] = field(default_factory=dict)
    # where each cache (value, role) is allocated: at the start, at a top-level loop's entry
    # (op id), or at the start and made room for at a loop nest's entry (`reserve_at_loop`)
    cache_at_start: list[tuple[Value, str]] = field(default_factory=list)
    cache_at_loop: dict[int, list[tuple[Value, str]]] = field(default_factory=dict)
    reserve_at_loop: dict[int, list[tuple[Value, str]]] = field(default_factory=dict)
    reserved: set[str] = field(default_factory=set)  # the caches of `reserve_at_loop`
    tape_slots: list[str] = field(default_factory=list)  # the caches, first in a split-mode tape
    complete: bool = False  # set once every decision is taken, before the forward sweep is written

    def decision(self, v: Value, role: str = "p") -> Decision | None:
        return next((d for d in self.decisions if d.value is v and d.role == role), None)

    def counts(self) -> dict[str, int]:
        """How many values each way of getting them serves."""
        out: dict[str, int] = {}
        for d in self.decisions:
            out[d.how] = out.get(d.how, 0) + 1
        return out

    def __str__(self) -> str:
        lines = ["tape plan" + ("" if self.complete else " (incomplete)")]
        lines += [f"  {d}" for d in self.decisions]
        return "\n".join(lines)
