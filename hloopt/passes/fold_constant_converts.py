"""fold-constant-converts: ``convert(constant)`` becomes one constant.

The dtype passes leave converts of constants behind (an upcast constant that
is narrowed again at a boundary, an int constant feeding an F32 dot); folding
them with the cast engine gives exactly what the convert computes, under the
chosen numerics: "xla" (XLA's convert, so jax results do not move) or
"neuron" (the device's cast rules).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hloopt.analysis.shape_inference import ShapeResolver
from hloopt.cast_engine import CastError, Numerics, cast, resolve
from hloopt.ir.builder import Builder
from hloopt.ir.element_types import COMPLEX_TYPES, numpy_dtype
from hloopt.ir.module import Instruction, Module
from hloopt.ir.shape import ArrayShape
from hloopt.passes.base import OpExpanderPass, PassResult

XLA: Numerics = "xla"


def _profile_for(element_type: str, profile: str) -> str | None:
    """The cast-engine profile that handles a type: the chosen one, else XLA's (f64, pred, fnuz…)."""
    for candidate in (profile, XLA):
        try:
            resolve(element_type, candidate)
            return candidate
        except CastError:
            continue
    return None


def foldable_types(source: str, target: str, profile: str) -> bool:
    if source in COMPLEX_TYPES and target in COMPLEX_TYPES:
        return True
    return _profile_for(source, profile) is not None and _profile_for(target, profile) is not None


def convert_array(value: np.ndarray, source: str, target: str, profile: str) -> np.ndarray:
    """`value` converted as the convert instruction would under `profile`.

    Under "neuron" a type the device lacks (f64, pred, the fnuz fp8s) exists there
    only as float32: XLA's convert takes it to or from float32 and the device's
    cast does the rest, so f64 -> f16 rounds twice on purpose (docs/decisions.md).
    """
    value = np.ascontiguousarray(value)
    if source in COMPLEX_TYPES:
        # The engine has no complex types; c64↔c128 is IEEE rounding of each part, as numpy does.
        return value.astype(numpy_dtype(target))
    if profile == XLA or (_profile_for(source, profile) == profile and _profile_for(target, profile) == profile):
        return cast(value, source, target, profile=profile)
    hub = cast(value, source, "f32", profile=_profile_for(source, profile) or XLA)
    return cast(hub, "f32", target, profile=_profile_for(target, profile) or XLA)


@dataclass(frozen=True)
class FoldConstantConverts(OpExpanderPass):
    """Replace each convert of an array constant by the converted constant."""

    numerics: Numerics = XLA

    def instruction_matches(self, instruction: Instruction, shapes: ShapeResolver) -> bool:
        if instruction.opcode != "convert" or len(instruction.operands) != 1:
            return False
        constant = instruction.operands[0]
        literal = constant.literal
        target = instruction.shape
        if constant.opcode != "constant" or literal is None or literal.is_elided or not isinstance(target, ArrayShape):
            return False
        source = literal.shape
        return isinstance(source, ArrayShape) and foldable_types(
            source.element_type, target.element_type, self.numerics
        )

    def expand(self, builder: Builder, instruction: Instruction, shapes: ShapeResolver) -> Instruction:
        literal = instruction.operands[0].literal
        target = instruction.shape
        assert literal is not None and isinstance(literal.shape, ArrayShape) and isinstance(target, ArrayShape)
        source = literal.shape.element_type
        return builder.constant(
            literal.converted(target, lambda array: convert_array(array, source, target.element_type, self.numerics))
        )

    def run_on_module(self, module: Module) -> PassResult:
        """Repeat until nothing matches, so ``convert(convert(constant))`` folds all the way."""
        rewritten, provenance = 0, list[tuple[str, str]]()
        while (step := super().run_on_module(module)).changed:
            rewritten += step.rewritten
            provenance += step.provenance
        return PassResult(rewritten > 0, rewritten, provenance=tuple(provenance))
