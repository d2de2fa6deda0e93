"""The pass registry: names, registration numbers, C++ class names, descriptions.

Registration numbers are the binary's (Neuron hilo pass registry); they fix
the run order. fold-constant-converts is hloopt's own and runs after them.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hloopt.errors import HloError
from hloopt.passes.base import HloPass
from hloopt.passes.batchnorm_training_upcast import BatchNormTrainingUpcast
from hloopt.passes.fold_constant_converts import FoldConstantConverts
from hloopt.passes.neuron_int_matmul_downcast import NeuronIntMatmulDowncast
from hloopt.passes.upcast_all_to_fp32 import UpcastAllToFP32


@dataclass(frozen=True)
class PassInfo:
    """One registry row; `make(numerics)` builds a fresh pass object."""

    name: str
    number: int
    class_name: str
    description: str
    make: Callable[[str], HloPass]
    in_all: bool = True


REGISTRY: tuple[PassInfo, ...] = (
    PassInfo("batchnorm-training-upcast", 51, "BatchNormTrainingUpcast",
             "BF16 batch-norm-training computed in F32, results narrowed back to BF16",
             lambda numerics: BatchNormTrainingUpcast()),
    PassInfo("upcast-all-to-fp32", 60, "UpcastAllToFP32",
             "every F16/BF16/F64/FP8/FP4 value and constant becomes F32; integers stay",
             lambda numerics: UpcastAllToFP32()),
    PassInfo("neuron-int-matmul-downcast", 68, "NeuronIntMatmulDowncast",
             "integer dot routed through an F32 dot between converts, stamped auto_cast=none",
             lambda numerics: NeuronIntMatmulDowncast()),
    PassInfo("fold-constant-converts", 1000, "FoldConstantConverts",
             "convert(constant) folded into one constant with the cast engine (hloopt's own)",
             lambda numerics: FoldConstantConverts(numerics), in_all=False),
)

_BY_NAME: dict[str, PassInfo] = {p.name: p for p in REGISTRY} | {p.class_name.lower(): p for p in REGISTRY}


def lookup(name: str) -> PassInfo:
    """A pass by kebab-case or C++ class name (case-insensitive); unknown names list the known ones."""
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        known = ", ".join(f"{p.name} ({p.class_name})" for p in REGISTRY)
        raise HloError(f"unknown pass {name.strip()!r}; known passes: {known}, or 'all'")
    return found


def select(spec: str) -> tuple[list[PassInfo], list[PassInfo]]:
    """``a,b`` or ``all`` → (as given, in registration order); duplicates are dropped."""
    given: list[PassInfo] = []
    for part in spec.split(","):
        if not part.strip():
            continue
        if part.strip().lower() == "all":
            given += [p for p in REGISTRY if p.in_all]
        else:
            given.append(lookup(part))
    given = list(dict.fromkeys(given))
    if not given:
        raise HloError("--passes names no pass; use 'all' or a comma-separated list (see 'hloopt passes')")
    return given, sorted(given, key=lambda p: p.number)
