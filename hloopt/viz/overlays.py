"""Model Explorer's node data (its ``GraphNodeData`` JSON: a value and colour per node id) for a graph of
`hloopt.viz.graph`: each node's element type, what a pipeline did to it, and the error `hloopt trace`
measured there.

Each overlay is keyed by graph id as Model Explorer's ``ModelNodeData`` file is, so a file applies to the
graph it was made for. Values are numbers, as Model Explorer wants: the element type's bits, a change's
code (`CHANGES`), an error in ULPs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hloopt.ir.element_types import ROWS
from hloopt.ir.module import Instruction, Module
from hloopt.viz.graph import Json, element_type_of

#: A colour per element type, and ``tuple``. Families share a hue (floats warm by width, integers green,
#: unsigned teal): f32 blue, bf16 orange, f16 gold, the f8s reds and pinks, so a cast shows as a change of colour.
DTYPE_COLOURS: dict[str, str] = {
    "pred": "#9e9e9e",
    "s1": "#e8f5e9",
    "s2": "#c8e6c9",
    "s4": "#a5d6a7",
    "s8": "#81c784",
    "s16": "#66bb6a",
    "s32": "#43a047",
    "s64": "#1b5e20",
    "u1": "#e0f2f1",
    "u2": "#b2dfdb",
    "u4": "#80cbc4",
    "u8": "#4db6ac",
    "u16": "#26a69a",
    "u32": "#00897b",
    "u64": "#004d40",
    "f16": "#fbc02d",
    "f32": "#64b5f6",
    "bf16": "#ff9800",
    "f64": "#3949ab",
    "f8e5m2": "#e53935",
    "f8e4m3": "#f06292",
    "f8e4m3fn": "#d81b60",
    "f8e4m3b11fnuz": "#ad1457",
    "f8e3m4": "#ff8a80",
    "f8e5m2fnuz": "#b71c1c",
    "f8e4m3fnuz": "#880e4f",
    "f8e8m0fnu": "#ff5252",
    "f6e3m2fn": "#ba68c8",
    "f6e2m3fn": "#8e24aa",
    "f4e2m1fn": "#4a148c",
    "c64": "#90a4ae",
    "c128": "#546e7a",
    "token": "#eeeeee",
    "opaque": "#bdbdbd",
    "tuple": "#ffffff",
}

#: What a pipeline did to a node, as its value in the "changed" overlay, with its colour.
CHANGES: dict[str, tuple[int, str]] = {
    "left": (0, "#eeeeee"),
    "rewritten": (1, "#ffb300"),
    "inserted": (2, "#e53935"),
    "removed": (3, "#8d6e63"),
}

#: The error overlays' colour thresholds, in ULPs of the instruction's type: each an upper bound.
ULP_THRESHOLDS: tuple[tuple[float, str], ...] = (
    (0, "#c8e6c9"),  # bit-identical
    (1, "#fff59d"),  # one step: a narrow type's rounding (trace's tolerance for 16 bits and fewer)
    (16, "#ffcc80"),
    (256, "#ff8a65"),
    (1.7976931348623157e308, "#e53935"),
)


def _data(name: str, results: Json, **extra: Any) -> Json:
    return {"name": name, "results": results, **extra}


def dtype_overlay(module: Module, ids: Mapping[Instruction, str], graph_id: str) -> Json:
    """Each node coloured by its element type (a tuple white); the value is the type's bits."""
    bits = {row.name: row.bits for row in ROWS}
    results: Json = {}
    for computation in module.computations:
        for instruction in computation.instructions:
            shape = instruction.shape
            name = element_type_of(shape) if shape is not None else "tuple"
            results[ids[instruction]] = {"value": bits.get(name, 0), "bgColor": DTYPE_COLOURS[name]}
    return {graph_id: _data("element type", results)}


def changes(after: Module, after_ids: Mapping[Instruction, str], provenance: Mapping[str, str]) -> dict[str, str]:
    """What the pipeline did to each node of the after graph: rewritten (it stands for the input instruction
    whose id it took), inserted (made by a pass, standing for no input node), or left."""
    done: dict[str, str] = {}
    for computation in after.computations:
        for instruction in computation.instructions:
            node_id = after_ids[instruction]
            source = provenance.get(instruction.name)
            done[node_id] = "left" if source is None else "rewritten" if node_id == source else "inserted"
    return done


def changed_overlays(
    before: Module,
    before_ids: Mapping[Instruction, str],
    after: Module,
    after_ids: Mapping[Instruction, str],
    provenance: Mapping[str, str],
    graph_ids: tuple[str, str],
) -> tuple[Json, Json]:
    """The "changed" overlay of the before graph (each input node rewritten, removed or left) and of the
    after graph (`changes`), from the pipeline's provenance."""
    after_changes = changes(after, after_ids, provenance)
    sources = set(provenance.values())
    before_results: Json = {}
    for computation in before.computations:
        for instruction in computation.instructions:
            node_id = before_ids[instruction]
            kind = "rewritten" if node_id in sources else "left" if node_id in after_changes else "removed"
            before_results[node_id] = _change(kind)
    after_results = {node_id: _change(kind) for node_id, kind in after_changes.items()}
    return (
        {graph_ids[0]: _data("changed", before_results)},
        {graph_ids[1]: _data("changed", after_results)},
    )


def _change(kind: str) -> Json:
    value, colour = CHANGES[kind]
    return {"value": value, "bgColor": colour}


def error_overlays(
    trace: Json, graph_id: str, ids: Mapping[str, str] | None = None, side: str = "origin"
) -> list[Json]:
    """The local and the propagated error of each traced instruction, in ULPs (``max_ulp`` of `trace`,
    the JSON of ``hloopt trace --json``), on `ULP_THRESHOLDS`. A node is named by the trace's `side`
    (``origin``: the traced input's instruction; ``b``: B's) through `ids` (name → node id; None: the
    name is the id). An instruction without a ULP figure (the kinds differ, or no local value) is left out."""
    local: Json = {}
    propagated: Json = {}
    for record in _records(trace):
        name = record.get(side)
        node_id = name if ids is None else ids.get(name) if name is not None else None
        if node_id is None:
            continue
        for results, error in ((local, record.get("local")), (propagated, record.get("propagated"))):
            ulps = error.get("max_ulp") if error else None
            if isinstance(ulps, (int, float)):
                results[node_id] = {"value": ulps}
    thresholds = [{"value": value, "bgColor": colour} for value, colour in ULP_THRESHOLDS]
    return [
        {graph_id: _data("local error (ULPs)", local, thresholds=thresholds)},
        {graph_id: _data("propagated error (ULPs)", propagated, thresholds=thresholds)},
    ]


def _records(trace: Json) -> Iterable[Json]:
    instructions = trace.get("instructions")
    return instructions if isinstance(instructions, list) else []
