"""Run-time side of checkpointing (`transform/checkpoint.py`): the schedule of one checkpointed loop.

Contract: `Plan(n, state_bytes, iter_bytes, limit, line)` is made by the generated program at the
entry of a checkpointed `for` loop, when its trip count `n`, the bytes of one snapshot of the
loop-carried state (`state_bytes`) and an estimate of the tape one iteration records
(`iter_bytes`) are known. When `n * iter_bytes <= limit` the loop is taped as without a limit
(`fits`). Otherwise the iterations are grouped into *steps* of `block` iterations (one step's
tape takes at most a quarter of the limit), and Griewank's binomial schedule (Revolve, from the
`checkpoint-schedules` package) over the steps, with as many snapshots as the rest of the limit
holds, gives two action lists the generated driver interprets:

- `forward`: `(ADVANCE, n0, n1, store)`: run the primal of steps `[n0, n1)`, after storing a
  snapshot of the state at `n0` when `store`;
- `reverse`: `(ADVANCE, ...)` as above, `(RESTORE, n, 0, keep)`: the state is set from snapshot `n`
  (deleted unless `keep`), and `(TAPE, n0, n1, 0)`: steps `[n0, n1)` are run taped, then their
  adjoint.

`iterations(n0, n1)` maps steps to the loop's iteration numbers. `Plan.log`, when a list, receives
every plan made (`zymo.cache_report(..., memory_limit=)` reads it). `OnlinePlan` is the schedule
of a `while` loop (trip count unknown at entry: online doubling, then Revolve per interval);
`Snapshots` holds a loop's snapshots and reuses dropped ones' buffers; `checkpointed` is the user's
loop marker (the iterable itself at run time).
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = [
    "checkpointed", "Plan", "OnlinePlan", "revolve", "Snapshots", "reuse_snaps", "nbytes", "snap", "put",
]

ADVANCE, RESTORE, TAPE = 0, 1, 2


def checkpointed(loop: Any, snapshots: int = 1) -> Any:
    """Marks a loop to checkpoint: `for t in zymo.checkpointed(range(n), snapshots=4):`. Run as
    Python it is `loop` itself; differentiated in reverse mode, the loop is checkpointed with at
    most `snapshots` snapshots of its state (one step per iteration), whatever the memory limit
    (none needed): the adjoint sweep recomputes the iterations between them (`transform/checkpoint.py`)."""
    if isinstance(snapshots, bool) or not isinstance(snapshots, int) or snapshots < 1:
        raise ValueError(f"checkpointed takes snapshots= a positive int, not {snapshots!r}")
    return loop


class Plan:
    log: list | None = None

    def __init__(self, n: int, state_bytes: int, iter_bytes: int, limit: int, line: int = 0,
                 marked: int | None = None) -> None:
        limit = max(int(limit), 1)  # what earlier loops left may be nothing: one snapshot, then
        self.n, self.state_bytes, self.iter_bytes, self.limit, self.line = n, state_bytes, iter_bytes, limit, line
        self.marked = marked  # `checkpointed(..., snapshots=marked)`: always checkpointed, steps of one iteration
        self.fits = n <= 0 or (marked is None and n * iter_bytes <= limit)
        self.block, self.steps, self.snapshots = n, 1, 0
        self.forward: list[tuple[int, int, int, int]] = []
        self.reverse: list[tuple[int, int, int, int]] = []
        if not self.fits and marked is not None:
            self.block, self.steps, self.snapshots = 1, n, min(marked, n)
            self._schedule()
        elif not self.fits:
            self.block = max(1, min(n, int(limit // (4 * max(iter_bytes, 1)))))
            self.steps = -(-n // self.block)
            room = int((limit - self.block * iter_bytes) // max(state_bytes, 1))
            self.snapshots = max(1, min(room, self.steps))  # held at once, at most
            self._schedule()
        if Plan.log is not None:
            Plan.log.append(self)

    def _schedule(self) -> None:
        self.forward, self.reverse = revolve(self.steps, self.snapshots, self.line, self.limit)

    def iterations(self, n0: int, n1: int) -> tuple[int, int]:
        """The iteration numbers `[j0, j1)` of steps `[n0, n1)`."""
        return min(n0 * self.block, self.n), min(n1 * self.block, self.n)

    def recomputed(self) -> int:
        """Iterations the adjoint sweep runs again beyond the taped ones (primal advances)."""
        return sum(self._len(a) for a in self.reverse if a[0] == ADVANCE)

    def _len(self, a: tuple[int, int, int, int]) -> int:
        j0, j1 = self.iterations(a[1], a[2])
        return j1 - j0

    def held_bytes(self) -> int:
        """What the forward sweep keeps for this loop's adjoint: the tape, or the snapshots."""
        return self.n * self.iter_bytes if self.fits else self.snapshots * self.state_bytes

    def peak_bytes(self) -> int:
        """The estimate the schedule was chosen by: snapshots and one step's tape."""
        if self.fits:
            return self.n * self.iter_bytes
        return self.snapshots * self.state_bytes + self.block * self.iter_bytes

    def describe(self) -> str:
        if self.fits:
            return (f"loop at line {self.line}: {self.n} iterations, tape about {self.n * self.iter_bytes} bytes "
                    f"within the limit of {self.limit} bytes: taped whole, not checkpointed")
        taped = self.n
        why = (f"marked zymo.checkpointed(..., snapshots={self.marked})" if self.marked else
               f"over the limit of {self.limit} bytes")
        return (f"loop at line {self.line}: {self.n} iterations, tape about {self.n * self.iter_bytes} bytes {why}: "
                f"checkpointed (Revolve) in {self.steps} steps of {self.block} "
                f"iterations, {self.snapshots} snapshot(s) of {self.state_bytes} bytes, "
                f"{self.recomputed()} iterations recomputed by primal advances and {taped} run taped in the "
                f"adjoint sweep; estimated peak {self.peak_bytes()} bytes")


class OnlinePlan:
    """The schedule of a checkpointed `while` loop (trip count unknown at its entry).

    Made at the loop's entry from the same sizes as `Plan` (no `n`): steps of `block` iterations,
    `slots` snapshots at once. The forward sweep runs the loop's primal a step at a time; before
    each step `store(snaps)` says whether to snapshot it: snapshots are kept at steps that are
    multiples of `interval`, at most `online` (half the slots) of them, and when they are full
    the interval doubles and every other one is dropped (online doubling: the snapshots stay
    evenly spread whatever the trip count turns out to be). `advanced(count, snaps)` after each
    step counts its iterations and says whether the loop goes on (a full step). The adjoint
    sweep then interprets `reverse(snaps)`: the intervals between the snapshots kept, last
    first, each reversed by Revolve (`revolve`) from its snapshot with the slots the earlier
    snapshots leave free.
    """

    def __init__(self, state_bytes: int, iter_bytes: int, limit: int, line: int = 0,
                 marked: int | None = None) -> None:
        limit = max(int(limit), 1)
        self.state_bytes, self.iter_bytes, self.limit, self.line = state_bytes, iter_bytes, limit, line
        self.fits, self.marked = False, marked
        self.block = 1 if marked else max(1, int(limit // (4 * max(iter_bytes, 1))))
        self.slots = marked or max(1, int((limit - self.block * iter_bytes) // max(state_bytes, 1)))
        self.online = max(1, self.slots // 2)
        self.interval, self.step, self.n = 1, 0, 0
        self.kept: list[int] = []
        self.actions: list[tuple[int, int, int, int]] = []
        if Plan.log is not None:
            Plan.log.append(self)

    def store(self, snaps: dict) -> bool:
        """Whether to snapshot the state before step `self.step`; drops snapshots to make room."""
        k = self.step
        while k % self.interval == 0 and len(snaps) >= self.online:
            self.interval *= 2
            for s in [s for s in snaps if s % self.interval]:
                del snaps[s]
        return k % self.interval == 0

    def advanced(self, count: int, snaps: dict) -> bool:
        """Step `self.step` ran `count` iterations: True when the loop may go on (a full step)."""
        self.n += count
        if count == 0:
            snaps.pop(self.step, None)  # the loop ended at the step's start: nothing to snapshot
            return False
        self.step += 1
        return count == self.block

    @property
    def steps(self) -> int:
        return -(-self.n // self.block)

    def reverse(self, snaps: dict) -> list[tuple[int, int, int, int]]:
        """The adjoint sweep's actions (`Plan.reverse`'s kinds), once the forward sweep has ended."""
        self.kept = sorted(snaps)
        out: list[tuple[int, int, int, int]] = []
        for i in reversed(range(len(self.kept))):
            s0 = self.kept[i]
            s1 = self.kept[i + 1] if i + 1 < len(self.kept) else self.steps
            fwd, rev = revolve(s1 - s0, max(1, min(self.slots - i, s1 - s0)), self.line, self.limit)
            # in the adjoint sweep the forward actions only store snapshots: the reverse ones
            # start from a restore, so the steps after the last store are not run
            while fwd and not fwd[-1][3]:
                fwd.pop()
            if fwd:
                fwd[-1] = (ADVANCE, fwd[-1][1], fwd[-1][1], 1)
            seg = [(RESTORE, s0, 0, 1)]
            seg += [(a, n0 + s0, n1 + s0, x) if a != RESTORE else (a, n0 + s0, n1, x) for a, n0, n1, x in fwd + rev]
            out += _drop_at_last_use(seg)
        self.actions = out
        return out

    def iterations(self, n0: int, n1: int) -> tuple[int, int]:
        """The iteration numbers `[j0, j1)` of steps `[n0, n1)`."""
        return min(n0 * self.block, self.n), min(n1 * self.block, self.n)

    def recomputed(self) -> int:
        """Iterations the adjoint sweep runs again beyond the taped ones (primal advances)."""
        return sum(j1 - j0 for a in self.actions if a[0] == ADVANCE for j0, j1 in [self.iterations(a[1], a[2])])

    def held_bytes(self) -> int:
        """What the forward sweep keeps for the adjoint, at most: the snapshots of the online schedule."""
        return self.online * self.state_bytes

    def peak_bytes(self) -> int:
        return self.slots * self.state_bytes + self.block * self.iter_bytes

    def describe(self) -> str:
        return (f"while loop at line {self.line}: {self.n} iterations (not known at its entry), tape about "
                f"{self.n * self.iter_bytes} bytes, "
                + (f"marked zymo.checkpointed(..., snapshots={self.marked})" if self.marked else
                   f"limit {self.limit} bytes") + f": checkpointed online in {self.steps} "
                f"steps of {self.block} iterations: the forward sweep kept {len(self.kept)} snapshot(s) of "
                f"{self.state_bytes} bytes at steps {self.kept[:8]}{' ...' if len(self.kept) > 8 else ''} "
                f"(every {self.interval} steps, doubling when {self.online} are held), each interval reversed "
                f"by Revolve with up to {self.slots} snapshots in all; {self.recomputed()} iterations recomputed "
                f"by primal advances and {self.n} run taped in the adjoint sweep; estimated peak "
                f"{self.peak_bytes()} bytes")


def _drop_at_last_use(actions: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """`actions` with the last restore of each snapshot that would outlive them made a pop."""
    last: dict[int, int] = {}
    for k, (a, n0, _, _) in enumerate(actions):
        if a == RESTORE:
            last[n0] = k
    out = list(actions)
    for n0, k in last.items():
        out[k] = (RESTORE, n0, 0, 0)
    return out


def revolve(steps: int, snapshots: int, line: int = 0, limit: int = 0) -> tuple[list, list]:
    """(forward, reverse) action lists (module docstring) of a binomial schedule (Griewank's: the
    fewest recomputations for the snapshots) over `steps` steps holding at most `snapshots`
    snapshots at once (one: every step is recomputed from the first). With a snapshot for every
    step, each is stored; else `checkpoint-schedules` gives it: `Revolve` for small problems (its
    tables cost about steps^2 * snapshots in Python), `MultistageCheckpointSchedule` (the same
    binomial schedule, compiled by Numba at its first use) for larger ones. Cached."""
    fwd, rev = _revolve(steps, snapshots, line, limit)
    return list(fwd), list(rev)


@functools.lru_cache(maxsize=64)
def _revolve(steps: int, snapshots: int, line: int, limit: int) -> tuple[tuple, tuple]:
    forward: list[tuple[int, int, int, int]] = []
    reverse: list[tuple[int, int, int, int]] = []
    if steps == 1:
        return ((ADVANCE, 0, 1, 1),), ((RESTORE, 0, 0, 0), (TAPE, 0, 1, 0))
    if snapshots >= steps:  # a snapshot per step: no recomputation
        forward = [(ADVANCE, k, k + 1, 1) for k in range(steps)]
        for k in reversed(range(steps)):
            reverse += [(RESTORE, k, 0, 0), (TAPE, k, k + 1, 0)]
        return tuple(forward), tuple(reverse)
    # the schedule's snapshots, and one more for the last step's state when there is room (else
    # the adjoint sweep recomputes that state from the first snapshot)
    keep_last = snapshots >= 2
    try:
        from checkpoint_schedules import (
            Copy,
            EndForward,
            EndReverse,
            Forward,
            Move,
            MultistageCheckpointSchedule,
            Reverse,
            Revolve,
        )
    except ImportError:
        from ..errors import ZymoUsageError

        raise ZymoUsageError(f"the loop at line {line} needs a checkpoint schedule under memory_limit="
                             f"{limit}, and the package checkpoint-schedules is not installed: "
                             "pip install 'zymo[checkpoint]' (or checkpoint-schedules)") from None
    k = snapshots - 1 if keep_last else 1
    schedule = Revolve(steps, k) if steps * steps * k <= 200_000 else MultistageCheckpointSchedule(steps, k, 0)
    out, pending = forward, None
    for a in schedule:
        if isinstance(a, Forward):
            n0, n1 = a.n0, a.n1
            if a.write_adj_deps and out is forward:
                # the forward sweep must reach the loop's end: snapshot this step, run it,
                # and let the adjoint sweep start from that snapshot
                out.append((ADVANCE, n0, n1, 1 if keep_last else 0))
                pending = (n0, n1)
                if keep_last:
                    reverse.append((RESTORE, n0, 0, 1))
                else:
                    reverse += [(RESTORE, 0, 0, 1), (ADVANCE, 0, n0, 0)]
            elif a.write_adj_deps:
                if a.write_ics:
                    out.append((ADVANCE, n0, n0, 1))
                pending = (n0, n1)
            else:
                out.append((ADVANCE, n0, n1, 1 if a.write_ics else 0))
        elif isinstance(a, EndForward):
            out = reverse
        elif isinstance(a, Reverse):
            assert pending == (a.n0, a.n1), (pending, a)
            out.append((TAPE, a.n0, a.n1, 0))
            pending = None
        elif isinstance(a, (Copy, Move)):
            out.append((RESTORE, a.n, 0, 1 if isinstance(a, Copy) else 0))
        elif isinstance(a, EndReverse):
            break
        else:  # pragma: no cover - Revolve gives only the actions above
            raise AssertionError(a)
    return tuple(forward), tuple(reverse)


class Snapshots(dict):
    """The snapshots of one checkpointed loop, by step number. A snapshot's arrays are copied into
    the buffers of snapshots dropped earlier (`pop`, `del`) when their shape and dtype match, so a
    schedule allocates no more buffers than it holds snapshots at once; a split-mode tape passed
    back in (`reuse_snaps`) gives its buffers to the next forward sweep."""

    def __init__(self) -> None:
        super().__init__()
        self.spare: list = []

    def snap(self, x: Any) -> Any:
        """A copy of state item `x` (an array, or a list of arrays), in a spare buffer if one fits."""
        if isinstance(x, list):
            return [self._copy(a) for a in x]
        return self._copy(x)

    def _copy(self, a: Any) -> Any:
        for k, b in enumerate(self.spare):
            if b.shape == a.shape and b.dtype == a.dtype:
                del self.spare[k]
                b[...] = a
                return b
        return a.copy()

    def _recycle(self, entry: Any) -> None:
        for item in entry:
            if isinstance(item, list):
                self.spare += [a for a in item if isinstance(a, np.ndarray)]
            elif isinstance(item, np.ndarray) and item.ndim:
                self.spare.append(item)

    def pop(self, key: Any, *default: Any) -> Any:
        """Remove snapshot `key`; its buffers become spare (read the entry before the next `snap`)."""
        entry = super().pop(key, *default)
        if entry is not None:
            self._recycle(entry)
        return entry

    def __delitem__(self, key: Any) -> None:
        self._recycle(self[key])
        super().__delitem__(key)

    def recycle_all(self) -> None:
        for entry in self.values():
            self._recycle(entry)
        self.clear()


def reuse_snaps(tape: Any, slot: int) -> Snapshots:
    """The snapshots of a split-mode tape passed back in (all their buffers spare), or new ones."""
    if tape is not None and isinstance(tape[slot], Snapshots):
        s = tape[slot]
        s.recycle_all()
        return s
    return Snapshots()


def nbytes(*state: Any) -> int:
    """Bytes of one snapshot of `state` (arrays, lists of arrays, numbers)."""
    total = 0
    for s in state:
        if isinstance(s, list):
            total += sum(getattr(x, "nbytes", 8) for x in s)
        else:
            total += getattr(s, "nbytes", 8)
    return total


def snap(x: Any) -> Any:
    """A copy of state item `x` (an array, or a list of arrays)."""
    if isinstance(x, list):
        return [a.copy() for a in x]
    return x.copy()


def put(x: Any, saved: Any) -> None:
    """Write snapshot `saved` back into the memory of state item `x`."""
    if isinstance(x, list):
        for a, s in zip(x, saved, strict=False):
            a[...] = s
    else:
        x[...] = saved
