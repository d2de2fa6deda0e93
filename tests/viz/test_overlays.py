"""Model Explorer's node data for a graph (`hloopt.viz.overlays`, `hloopt.viz.view`): element types, what a
pipeline changed (its provenance), and `hloopt trace --json`'s errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hloopt.arrays.tracing import TraceReport
from hloopt.cli.trace import TraceRun, run_trace
from hloopt.ir.element_types import ROWS
from hloopt.ir.module import Module
from hloopt.passes.neuron_cc_flags import parse_neuron_cc_flags
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse
from hloopt.viz.graph import element_type_of, node_ids
from hloopt.viz.overlays import CHANGES, DTYPE_COLOURS, ULP_THRESHOLDS, dtype_overlay
from hloopt.viz.view import View, make_view

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MLP = EXAMPLES / "fp8_bf16_mlp.hlo"
AUTO_CAST = parse_neuron_cc_flags("--auto-cast all --auto-cast-type bf16", None).pass_spec


def _pipeline(path: Path, passes: str) -> tuple[Module, Module, dict[str, str]]:
    text = path.read_text()
    before, after = parse(text, str(path)), parse(text, str(path))
    return before, after, run_pipeline(after, passes).provenance


def test_every_element_type_has_its_own_colour() -> None:
    names = [row.name for row in ROWS] + ["tuple"]
    assert sorted(DTYPE_COLOURS) == sorted(names)
    assert len(set(DTYPE_COLOURS.values())) == len(names)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.hlo")), ids=lambda p: p.name)
def test_the_dtype_overlay_colours_every_node_by_its_type(path: Path) -> None:
    module = parse(path.read_text(), str(path))
    ids = node_ids(module)
    results = dtype_overlay(module, ids, "g")["g"]["results"]
    bits = {row.name: row.bits for row in ROWS}
    assert set(results) == set(ids.values())
    for instruction, node_id in ids.items():
        assert instruction.shape is not None
        kind = element_type_of(instruction.shape)
        assert results[node_id] == {"value": bits.get(kind, 0), "bgColor": DTYPE_COLOURS[kind]}


@pytest.mark.parametrize("passes", ["all", AUTO_CAST])
def test_the_changed_overlays_follow_the_provenance(passes: str) -> None:
    before, after, provenance = _pipeline(MLP, passes)
    view = make_view("m", before, after, provenance)
    before_changed = view.node_data["m.changed.json"][1]["m"]["results"]
    after_changed = view.node_data["m.after.changed.json"][1]["m after passes"]["results"]
    kinds = {code: kind for kind, (code, _) in CHANGES.items()}
    after_ids = {i.name: node_id for i, node_id in node_ids(after, _given(view)).items()}
    sources = set(provenance.values())
    for name, node_id in after_ids.items():
        kind = kinds[after_changed[node_id]["value"]]
        assert after_changed[node_id]["bgColor"] == CHANGES[kind][1]
        if name not in provenance:
            assert kind == "left"
        else:
            assert kind == ("rewritten" if node_id == provenance[name] else "inserted")
    for instruction in (i for c in before.computations for i in c.instructions):
        kind = kinds[before_changed[instruction.name]["value"]]
        expected = "rewritten" if instruction.name in sources else "left"
        assert kind == (expected if instruction.name in after_changed else "removed")
    done = {kinds[r["value"]] for r in after_changed.values()}
    assert done == ({"left", "rewritten", "inserted"} if passes == AUTO_CAST else {"left", "rewritten"})
    assert view.panes == [("m.json", "m"), ("m.after.json", "m after passes")]


def _given(view: View) -> dict[str, str]:
    """The after graph's ids by instruction name, read back from the graph the view wrote."""
    (graph,) = view.models["m.after.json"]
    return {next(a["value"] for a in node["attrs"] if a["key"] == "name"): node["id"] for node in graph["nodes"]}


@pytest.mark.slow
def test_the_error_overlays_carry_the_traces_ulps() -> None:
    """The trace of the MLP against its auto-cast (XLA in a worker): each traced instruction's local and
    propagated max_ulp on the input's node (its origin) and on the output's (B's name)."""
    before, after, provenance = _pipeline(MLP, AUTO_CAST)
    report = run_trace(TraceRun(str(MLP), None, AUTO_CAST, ("xla", "xla"), None, 0, 1 << 30), 600).result
    assert isinstance(report, TraceReport)
    trace = json.loads(report.to_json())
    view = make_view("m", before, after, provenance, trace)
    after_ids = {i.name: node_id for i, node_id in node_ids(after, _given(view)).items()}
    for side, graph_id, prefix, ids in (("origin", "m", "m", None), ("b", "m after passes", "m.after", after_ids)):
        for which in ("local", "propagated"):
            data = view.node_data[f"{prefix}.{which}-error.json"][1][graph_id]
            assert [t["value"] for t in data["thresholds"]] == [value for value, _ in ULP_THRESHOLDS]
            expected = {}
            for record in trace["instructions"]:
                error = record[which]
                node_id = record[side] if ids is None else ids.get(record[side])
                if error is not None and isinstance(error["max_ulp"], int) and node_id is not None:
                    expected[node_id] = {"value": error["max_ulp"]}
            assert data["results"] == expected
            assert expected
    propagated = view.node_data["m.propagated-error.json"][1]["m"]["results"]
    assert max(r["value"] for r in propagated.values()) > 1000  # bf16 in an f32 MLP: thousands of f32 ULPs
