"""The adapter Model Explorer loads for ``--extensions=hloopt.model_explorer`` (it imports ``<module>.main``)."""

from __future__ import annotations

from typing import Any

from model_explorer import Adapter, AdapterMetadata, ModelExplorerGraphs
from model_explorer.graph_builder import Graph

from hloopt.model_explorer import file_graph


class HloAdapter(Adapter):
    """HLO text, HloModuleProto (.pb), XLA snapshots and StableHLO, read by hloopt."""

    metadata = AdapterMetadata(
        id="hloopt_hlo",
        name="hloopt HLO adapter",
        description="XLA HLO modules (text, HloModuleProto, snapshots, StableHLO) read by hloopt.",
        fileExts=["hlo", "txt", "pb", "mlir", "mlirbc"],
    )

    def __init__(self) -> None:
        super().__init__()

    def convert(self, model_path: str, settings: dict[str, Any]) -> ModelExplorerGraphs:
        """The module as one graph. Its nodes are JSON-ready dicts where Model Explorer's dataclasses would
        be: its server turns the response into JSON with `dataclasses.asdict`, which copies dicts as they are."""
        graph = file_graph(model_path)
        return {"graphs": [Graph(id=graph["id"], nodes=graph["nodes"])]}
