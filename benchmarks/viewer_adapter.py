"""The Model Explorer adapter's conversion beside hloopt's parse of the same module, in the same run.

    python benchmarks/viewer_adapter.py [--copies 72] [--repeat 3]

The module is parse_print.py's "jax-100k" (a compiled jax training step's computations copied to about
100k instructions). Prints CPU seconds (best of `--repeat`) of `hloopt.parse` and of
`hloopt.viz.graph.module_graph` (the graph JSON the adapter hands Model Explorer), and their ratio.
Goal (issue 27): conversion ≤ 2× parse.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from typing import Any

from parse_print import compiled_jax_step, replicate

import hloopt
from hloopt.support.gcpause import paused_gc
from hloopt.viz.graph import module_graph


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Least CPU time of `repeat` calls (the machine may be shared), the collector paused as the CLI pauses it."""
    times, result = [], None
    for _ in range(repeat):
        result = None
        gc.collect()
        start = time.process_time()
        with paused_gc():
            result = fn()
        times.append(time.process_time() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=72)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    text = replicate(compiled_jax_step(), args.copies)
    parse_seconds, module = best(lambda: hloopt.parse(text), args.repeat)
    convert_seconds, graph = best(lambda: module_graph(module), args.repeat)
    count = sum(len(c.instructions) for c in module.computations)
    assert len(graph["nodes"]) == count
    print(f"{count} instructions")
    print(f"   parse   {parse_seconds:7.3f}s CPU")
    print(f"   convert {convert_seconds:7.3f}s CPU")
    print(f"   ratio convert/parse {convert_seconds / parse_seconds:.2f}x (goal ≤ 2)")
    serve_seconds, body = best(lambda: json.dumps(_served(graph)), args.repeat)
    print(f"   and Model Explorer's server turning the adapter's answer into JSON: {serve_seconds:7.3f}s CPU,")
    print(f"   {len(body) / 1e6:.0f} MB ({serve_seconds / parse_seconds:.2f}x parse; not the adapter's, no goal)")


def _served(graph: dict[str, Any]) -> Any:
    """What the server sends for the adapter's answer (its `convert_adapter_response`: `asdict` of it)."""
    from model_explorer.graph_builder import Graph
    from model_explorer.utils import convert_adapter_response

    return convert_adapter_response({"graphs": [Graph(id=graph["id"], nodes=graph["nodes"])]})


if __name__ == "__main__":
    main()
