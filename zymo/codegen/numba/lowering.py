"""How generated programs lower to LLVM: Numba's lowering, less work that changes no result.

Contract: `NativeLowering` is Numba's `NativeLowering` pass with `Lower` as its lowering class.
`Lower` emits exactly what Numba's lowering emits, except that the back edge of each loop
of the program (a jump, or a branch, to a block at or before its own) carries the LLVM loop property
`llvm.loop.unroll.runtime.disable`: LLVM does not unroll the loop by a count known only at
run time (eight copies of the body, and a remainder loop). The property is a hint to LLVM's
optimizer; it changes no result.

Loops of a derivative carry caches, adjoint accumulations and branches. Unrolled, they made
longer programs that compiled and ran slower (`docs/decisions/0005`). Loops that Numba's
implementations and zymo's intrinsics write (NumPy kernels, elementwise loops) are not loops
of the program: they are unrolled as Numba unrolls them (marking them too slowed programs
whose time is in such loops). So are the
program's loops whose trip count is a constant, which LLVM unrolls in full.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir as llvm_ir
from numba.core import ir, lowering
from numba.core import typed_passes as tp
from numba.core.compiler_machinery import register_pass

NO_RUNTIME_UNROLL = "llvm.loop.unroll.runtime.disable"


class _LoopID(llvm_ir.values.MDValue):
    """An LLVM loop ID, `distinct !{!self, !properties}`: llvmlite's metadata nodes are
    uniqued by their operands and cannot refer to themselves, which a loop ID must."""

    def __init__(self, module: llvm_ir.Module, properties: llvm_ir.values.MDValue) -> None:
        super().__init__(module, [properties], name=str(len(module.metadata)))  # appends itself to the module

    def descr(self, buf: list) -> None:
        buf += (f"distinct !{{ {self.get_reference()}, {self.operands[0].get_reference()} }}", "\n")

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__


class AccessGroup(llvm_ir.values.MDValue):
    """An LLVM access group, `distinct !{}`: the memory accesses of one loop that carry no
    dependence from one iteration to another (`parallel_loop_id`)."""

    def __init__(self, module: llvm_ir.Module) -> None:
        super().__init__(module, [], name=str(len(module.metadata)))  # appends itself to the module

    def descr(self, buf: list) -> None:
        buf += ("distinct !{}", "\n")

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__


def parallel_loop_id(module: llvm_ir.Module, group: AccessGroup) -> _LoopID:
    """A loop ID saying that the accesses of `group` carry no dependence between the loop's
    iterations (`llvm.loop.parallel_accesses`): LLVM vectorizes the loop without testing at
    run time whether its pointers overlap."""
    props = module.add_metadata([llvm_ir.MetaDataString(module, "llvm.loop.parallel_accesses"), group])
    return _LoopID(module, props)


def _targets(terminator: Any) -> tuple:
    """The labels a block's terminator may jump to."""
    if isinstance(terminator, ir.Jump):
        return (terminator.target,)
    if isinstance(terminator, ir.Branch):  # a `while` loop's test, which Python repeats at its end
        return (terminator.truebr, terminator.falsebr)
    return ()


class Lower(lowering.Lower):
    """Numba's lowering of a function, with its loops' back edges marked (module contract)."""

    def pre_lower(self) -> None:
        super().pre_lower()
        self._back_edges = {id(block.terminator) for label, block in self.blocks.items()
                            if any(target <= label for target in _targets(block.terminator))}
        self._loop_properties = None

    def lower_inst(self, inst: Any) -> None:
        super().lower_inst(inst)
        if id(inst) in self._back_edges:
            if self._loop_properties is None:
                self._loop_properties = self.module.add_metadata(
                    [llvm_ir.MetaDataString(self.module, NO_RUNTIME_UNROLL)])
            self.builder.block.terminator.set_metadata("llvm.loop", _LoopID(self.module, self._loop_properties))


@register_pass(mutates_CFG=True, analysis_only=False)
class NativeLowering(tp.NativeLowering):
    """Numba's `NativeLowering` with `Lower` (module contract)."""

    _name = "zymo_native_lowering"

    @property
    def lowering_class(self) -> type:
        return Lower
