"""hloopt in Google's Model Explorer (``pip install hloopt[viz]``): ``model-explorer
--extensions=hloopt.model_explorer m.hlo`` opens any module hloopt reads (HLO text, HloModuleProto,
an XLA snapshot, StableHLO) as a graph.

Model Explorer loads an extension module's ``main`` submodule (`main` holds the adapter); `server` is
what ``hloopt view`` runs in its own process. This package is the only importer of ``model_explorer``;
the graph and its overlays are built in `hloopt.viz`, without it.
"""

from __future__ import annotations

from pathlib import Path

from hloopt.ir.module import Module
from hloopt.text.parser import parse
from hloopt.viz.graph import Json, module_graph
from hloopt.xla.formats import load


def read_module(path: str) -> Module:
    """The module in `path`, whatever its format (a proto or StableHLO is read by XLA in a worker)."""
    return parse(load(path).text, path)


def file_graph(path: str) -> Json:
    """The graph of the module in `path`, named after the file."""
    return module_graph(read_module(path), Path(path).name)
