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
every plan made (`zymo.cache_report(..., memory_limit=)` reads it).
"""
from __future__ import annotations

from typing import Any

ADVANCE, RESTORE, TAPE = 0, 1, 2


class Plan:
    log: list | None = None

    def __init__(self, n: int, state_bytes: int, iter_bytes: int, limit: int, line: int = 0) -> None:
        self.n, self.state_bytes, self.iter_bytes, self.limit, self.line = n, state_bytes, iter_bytes, limit, line
        self.fits = n <= 0 or n * iter_bytes <= limit
        self.block, self.steps, self.snapshots = n, 1, 0
        self.forward: list[tuple[int, int, int, int]] = []
        self.reverse: list[tuple[int, int, int, int]] = []
        if not self.fits:
            self.block = max(1, min(n, int(limit // (4 * max(iter_bytes, 1)))))
            self.steps = -(-n // self.block)
            room = int((limit - self.block * iter_bytes) // max(state_bytes, 1))
            self.snapshots = max(1, min(room, self.steps))  # held at once, at most
            self._schedule()
        if Plan.log is not None:
            Plan.log.append(self)

    def _schedule(self) -> None:
        if self.steps == 1:
            self.forward = [(ADVANCE, 0, 1, 1)]
            self.reverse = [(RESTORE, 0, 0, 0), (TAPE, 0, 1, 0)]
            return
        # Revolve's snapshots, and one more for the last step's state when there is room (else
        # the adjoint sweep recomputes that state from the first snapshot)
        keep_last = self.snapshots >= 2
        try:
            from checkpoint_schedules import Copy, EndForward, EndReverse, Forward, Move, Reverse, Revolve
        except ImportError:
            from ..errors import ZymoUsageError

            raise ZymoUsageError(f"the loop at line {self.line} needs a checkpoint schedule under memory_limit="
                                 f"{self.limit}, and the package checkpoint-schedules is not installed: "
                                 "pip install 'zymo[checkpoint]' (or checkpoint-schedules)") from None

        out, pending = self.forward, None
        for a in Revolve(self.steps, self.snapshots - 1 if keep_last else 1):
            if isinstance(a, Forward):
                n0, n1 = a.n0, a.n1
                if a.write_adj_deps and out is self.forward:
                    # the forward sweep must reach the loop's end: snapshot this step, run it,
                    # and let the adjoint sweep start from that snapshot
                    out.append((ADVANCE, n0, n1, 1 if keep_last else 0))
                    pending = (n0, n1)
                    if keep_last:
                        self.reverse.append((RESTORE, n0, 0, 1))
                    else:
                        self.reverse += [(RESTORE, 0, 0, 1), (ADVANCE, 0, n0, 0)]
                elif a.write_adj_deps:
                    if a.write_ics:
                        out.append((ADVANCE, n0, n0, 1))
                    pending = (n0, n1)
                else:
                    out.append((ADVANCE, n0, n1, 1 if a.write_ics else 0))
            elif isinstance(a, EndForward):
                out = self.reverse
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

    def iterations(self, n0: int, n1: int) -> tuple[int, int]:
        """The iteration numbers `[j0, j1)` of steps `[n0, n1)`."""
        return min(n0 * self.block, self.n), min(n1 * self.block, self.n)

    def recomputed(self) -> int:
        """Iterations the adjoint sweep runs again beyond the taped ones (primal advances)."""
        return sum(self._len(a) for a in self.reverse if a[0] == ADVANCE)

    def _len(self, a: tuple[int, int, int, int]) -> int:
        j0, j1 = self.iterations(a[1], a[2])
        return j1 - j0

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
        return (f"loop at line {self.line}: {self.n} iterations, tape about {self.n * self.iter_bytes} bytes over "
                f"the limit of {self.limit} bytes: checkpointed (Revolve) in {self.steps} steps of {self.block} "
                f"iterations, {self.snapshots} snapshot(s) of {self.state_bytes} bytes, "
                f"{self.recomputed()} iterations recomputed by primal advances and {taped} run taped in the "
                f"adjoint sweep; estimated peak {self.peak_bytes()} bytes")


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
