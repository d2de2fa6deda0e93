"""What ``hloopt view`` shows, as files: the graphs Model Explorer opens and the node data laid over them.

A module alone is one graph; after a pipeline, the input and the output are two graphs, the output's
nodes matched to the input's by the passes' provenance (`graph.matched_ids`) so Model Explorer's two
panes line them up. Overlays: dtype on each graph, changed on both after a pipeline, and with a trace
the local and propagated error (on the input by the trace's ``origin`` names, on the output by B's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hloopt.ir.module import Module
from hloopt.viz.graph import Json, matched_ids, module_graph, node_ids
from hloopt.viz.overlays import changed_overlays, dtype_overlay, error_overlays


@dataclass
class View:
    """Files to write, by name: `models` (Model Explorer's graph JSON, each a list of one graph) and
    `node_data` (each with the model file it is laid over)."""

    models: dict[str, list[Json]] = field(default_factory=dict[str, list[Json]])
    node_data: dict[str, tuple[str, Json]] = field(default_factory=dict[str, tuple[str, Json]])
    #: The model file and graph id of each pane: the two of a compare, after a pipeline.
    panes: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])


def make_view(
    stem: str,
    before: Module,
    after: Module | None = None,
    provenance: Mapping[str, str] | None = None,
    trace: Json | None = None,
) -> View:
    """The files of a view of `before` (named after `stem`), of `after` a pipeline whose composed
    provenance is `provenance`, with the overlays of `trace` (``hloopt trace --json`` of the two)."""
    view = View()
    before_ids = node_ids(before)
    before_file, before_id = f"{stem}.json", stem
    view.models[before_file] = [module_graph(before, before_id)]
    view.node_data[f"{stem}.dtype.json"] = (before_file, dtype_overlay(before, before_ids, before_id))
    if trace is not None:
        local, propagated = error_overlays(trace, before_id, None, "origin")
        view.node_data[f"{stem}.local-error.json"] = (before_file, local)
        view.node_data[f"{stem}.propagated-error.json"] = (before_file, propagated)
    if after is None:
        return view
    provenance = provenance or {}
    given = matched_ids(before, after, provenance)
    after_ids = node_ids(after, given)
    after_file, after_id = f"{stem}.after.json", f"{stem} after passes"
    view.models[after_file] = [module_graph(after, after_id, given)]
    view.panes = [(before_file, before_id), (after_file, after_id)]
    view.node_data[f"{stem}.after.dtype.json"] = (after_file, dtype_overlay(after, after_ids, after_id))
    changed = changed_overlays(before, before_ids, after, after_ids, provenance, (before_id, after_id))
    view.node_data[f"{stem}.changed.json"] = (before_file, changed[0])
    view.node_data[f"{stem}.after.changed.json"] = (after_file, changed[1])
    if trace is not None:
        by_name = {instruction.name: node_id for instruction, node_id in after_ids.items()}
        local, propagated = error_overlays(trace, after_id, by_name, "b")
        view.node_data[f"{stem}.after.local-error.json"] = (after_file, local)
        view.node_data[f"{stem}.after.propagated-error.json"] = (after_file, propagated)
    return view
