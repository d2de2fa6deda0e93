"""UpcastAllToFP32 (#60): every non-F32 float in the module becomes F32.

The dtype policy is the binary's ``UpcastShapeToFP32`` transcribed by
PrimitiveType code: F16/F64/BF16, and of the FP8/FP4 block the codes that the
CSWTCH_446 selector table marks, plus the 0x20/0x21 special case. Integers,
PRED, S4/U4/S2/U2/S1/U1, complex and token stay. Instructions whose element
types are part of an outside contract ("fixed" below) keep their types and get
converts at the boundary instead, so the module stays valid; see
docs/decisions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.ir import element_types
from hloopt.ir.module import Instruction, Module, ProgramLayout
from hloopt.ir.shape import ArrayShape, Shape
from hloopt.passes.base import HloPass, PassResult
from hloopt.passes.retyping import Retyping, apply_plans, packed_size_dropped, plan_computation

#: CSWTCH_446 @ VA 0x410830, indexed by code − 0x13 (the 16th byte is outside the range check).
CSWTCH_446 = bytes.fromhex("01010000010101000001010000000100")
F32 = 0x0B


def upcasts_to_f32(code: int) -> bool:
    """The branch structure of ``UpcastShapeToFP32`` @ 0x1f74020, on one PrimitiveType code."""
    if 0 <= code - 0x0A <= 2 or code == 0x10:
        return code != F32
    if 0 <= code - 0x13 <= 0x0E:
        return bool(CSWTCH_446[code - 0x13]) or 0 <= code - 0x20 <= 1
    return False


#: Element types the pass turns into F32 (f6e3m2fn/f6e2m3fn, codes 35/36, fall outside the dispatch).
UPCAST_TYPES: frozenset[str] = frozenset(row.name for row in element_types.ROWS if upcasts_to_f32(row.code))


def _to_f32(shape: ArrayShape) -> ArrayShape:
    return packed_size_dropped(shape, "f32")


#: ``UpcastShapeToFP32`` as a retyping; constants are rebuilt with XLA's convert rules.
UPCAST = Retyping(UPCAST_TYPES, _to_f32, "xla")


def upcast_shape(shape: Shape) -> Shape:
    """``UpcastShapeToFP32``: each upcast leaf to F32, tuples element by element."""
    return UPCAST.shape(shape)


@dataclass(frozen=True)
class UpcastAllToFP32(HloPass):
    """Every F16/BF16/F64/FP8/FP4 value and constant → F32, in every computation; the entry layout follows."""

    def matches(self, module: Module) -> list[Instruction]:
        shapes = ShapeResolver(module)
        return [i for c in module.computations for i in plan_computation(c, shapes, UPCAST).instructions()]

    def run_on_module(self, module: Module) -> PassResult:
        shapes = ShapeResolver(module)
        plans = [(c, plan_computation(c, shapes, UPCAST)) for c in module.computations]
        rewritten, provenance = apply_plans(plans, shapes, UPCAST)
        changed = rewritten > 0
        layout = module.entry_layout
        if layout is not None:
            upcast = ProgramLayout(tuple(upcast_shape(p) for p in layout.parameters), upcast_shape(layout.result))
            if upcast != layout:
                module.entry_layout = upcast
                changed = True
                rewritten = max(rewritten, 1)  # the entry signature counts as one rewrite when nothing else changed
        return PassResult(changed, rewritten, provenance=tuple(provenance))
