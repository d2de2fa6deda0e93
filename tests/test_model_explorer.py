"""The Model Explorer adapter (`hloopt.model_explorer`) through Model Explorer's own extension API and server,
and ``hloopt view``'s pages in headless Chromium: a shipped example (before and after the auto-cast, traced),
a jax program's optimised dump with fusions and a while loop, and a 50,000-instruction module. The node
count the page shows is the module's instruction count, the dtype overlay colours every node, and the
error overlay holds ``hloopt trace --json``'s values. The README's screenshots are written here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from browser import open_page, require_browser
from viewer import RunningView, require_model_explorer, running_view

from hloopt.passes.neuron_cc_flags import parse_neuron_cc_flags
from hloopt.passes.pipeline import run_pipeline
from hloopt.text.parser import parse
from hloopt.xla.formats import load

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "fp8_bf16_mlp.hlo"
FLAGS = "--auto-cast all --auto-cast-type bf16"
IMAGES = ROOT / "docs" / "images"

#: A jax program XLA fuses, with a loop: dumped optimised, as text and as HloModuleProto.
JAX_PROGRAM = """
import jax, jax.numpy as jnp
def step(x, w):
    def body(i, h):
        return jnp.tanh(h @ w) * 0.5 + h
    return jax.lax.fori_loop(0, 3, body, x).sum(axis=0)
jax.jit(step)(jnp.ones((4, 8)), jnp.ones((8, 8)))
"""


def _count(path: Path) -> int:
    module = parse(load(str(path)).text, str(path))
    return sum(len(c.instructions) for c in module.computations)


@pytest.fixture(scope="module")
def jax_dump(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The optimised module of `JAX_PROGRAM`, by format (``txt``, ``pb``), dumped by jax in a subprocess."""
    directory = tmp_path_factory.mktemp("dump")
    flags = f"--xla_dump_to={directory} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto --xla_dump_hlo_pass_re=^$"
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"}
    subprocess.run([sys.executable, "-c", JAX_PROGRAM], check=True, env=env, timeout=300)
    found = {}
    for suffix in ("txt", "pb"):
        (path,) = [
            p
            for p in directory.glob(f"*jit_step.cpu_after_optimizations.{'hlo.pb' if suffix == 'pb' else 'txt'}")
            if "buffer" not in p.name
        ]
        found[suffix] = path
    text = found["txt"].read_text()
    assert " fusion(" in text and " while(" in text
    return found


def _adapter_graph(path: Path) -> dict[str, Any]:
    """The adapter's graph, as Model Explorer's extension manager runs it for its server."""
    from model_explorer.extension_manager import ExtensionManager

    manager = ExtensionManager(["hloopt.model_explorer"])
    manager.load_extensions()
    command = {
        "extensionId": "hloopt_hlo",
        "cmdId": "convert",
        "modelPath": str(path),
        "settings": {},
        "deleteAfterConversion": False,
    }
    (graph,) = manager.run_cmd(command)["graphs"]
    return graph


def test_the_adapter_converts_an_example_through_model_explorers_extension_manager() -> None:
    require_model_explorer()
    graph = _adapter_graph(EXAMPLE)
    assert graph["id"] == EXAMPLE.name
    assert len(graph["nodes"]) == _count(EXAMPLE)


def test_the_adapter_refuses_a_bad_module_with_its_location(tmp_path: Path) -> None:
    require_model_explorer()
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] bogus()\n}\n")
    with pytest.raises(Exception, match=re.escape(f"{bad}:4:")):
        _adapter_graph(bad)


@pytest.mark.slow
def test_the_adapter_reads_protos_and_snapshots(jax_dump: dict[str, Path], jax_snapshots: dict[str, Path]) -> None:
    require_model_explorer()
    for path in (jax_dump["pb"], jax_snapshots["softmax"]):
        assert len(_adapter_graph(path)["nodes"]) == _count(path)


def _shown_counts(view: RunningView, url: str | None = None, wait: float = 300) -> tuple[list[int], Any]:
    """The page's "op node count" of each pane, once shown."""
    with open_page(url or view.address, timeout_ms=wait * 1000) as page:
        page.page.get_by_text("op node count").first.wait_for()
        counts = [int(n) for n in re.findall(r"op node count\s+(\d+)", page.page.inner_text("body"))]
        return counts, page.console_errors + page.page_errors


def _page_errors(errors: list[str]) -> list[str]:
    """The page's errors but its request for Google's fonts (which a machine without a network refuses)."""
    return [e for e in errors if "ERR_NAME_NOT_RESOLVED" not in e]


def _check_dtype_overlays(view: RunningView) -> None:
    """Each dtype overlay has a colour for every node of its graph, as the server hands them to the page."""
    data = view.page_data
    overlays = {Path(p).name: (p, m) for p, m in zip(data["nodeData"], data["nodeDataTargets"], strict=True)}
    models = {Path(m["url"]).name: m["url"] for m in data["models"]}
    checked = 0
    for name, (path, model) in overlays.items():
        if not name.endswith("dtype.json"):
            continue
        (graph,) = view.read_json(models[model])
        results = view.read_json(path)[graph["id"]]["results"]
        assert set(results) == {node["id"] for node in graph["nodes"]}
        assert all(r["bgColor"].startswith("#") for r in results.values())
        checked += 1
    assert checked == len(models)


def _shot(view: RunningView, name: str, models: list[int], overlays: list[str], panes: bool) -> None:
    """A screenshot for the README: the page with only these models and overlays, its layers expanded."""
    data = dict(view.page_data)
    data["models"] = [data["models"][i] for i in models]
    chosen = [i for i, p in enumerate(data["nodeData"]) if Path(p).name in overlays]
    data["nodeData"] = [data["nodeData"][i] for i in chosen]
    data["nodeDataTargets"] = [data["nodeDataTargets"][i] for i in chosen]
    if not panes:
        data.pop("uiState", None)
        data.pop("sync", None)
    url = f"{view.origin}/?data={urllib.parse.quote(json.dumps(data))}"
    with open_page(url, width=1400, height=800) as page:
        page.page.get_by_text("op node count").first.wait_for()
        for button in page.page.get_by_text("unfold_more_double").all():  # expand every layer
            button.click()
        while panes and (shown := [b for b in page.page.get_by_text("chevron_right").all() if b.is_visible()]):
            shown[0].click()  # the side panel of each pane closed: room for the graphs
        page.page.mouse.move(5, 300)  # no tooltip in the picture
        time.sleep(2)  # the layout's animation
        page.screenshot(IMAGES / name, full_page=False)


@pytest.mark.slow
def test_a_shipped_example_before_and_after_the_auto_cast_with_its_trace(tmp_path: Path) -> None:
    require_browser()
    require_model_explorer()
    trace = subprocess.run(
        [sys.executable, "-m", "hloopt", "trace", EXAMPLE, "--neuron-cc-flags", FLAGS, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert trace.returncode in (0, 1), trace.stderr
    records = json.loads(trace.stdout)["instructions"]
    out = tmp_path / "view"
    with running_view(EXAMPLE, "--neuron-cc-flags", FLAGS, "--trace", "--out", out) as view:
        counts, errors = _shown_counts(view)
        after = parse(EXAMPLE.read_text(), str(EXAMPLE))
        run_pipeline(after, parse_neuron_cc_flags(FLAGS).pass_spec)
        assert counts == [_count(EXAMPLE), sum(len(c.instructions) for c in after.computations)]
        assert not _page_errors(errors)
        _check_dtype_overlays(view)
        for which in ("local", "propagated"):
            shown = view.read_json(str(out / f"fp8_bf16_mlp.{which}-error.json"))["fp8_bf16_mlp"]["results"]
            expected = {
                r["origin"]: r[which]["max_ulp"]
                for r in records
                if r[which] is not None and isinstance(r[which]["max_ulp"], int)
            }
            assert {k: v["value"] for k, v in shown.items()} == expected
            assert max(expected.values()) > 0
        _shot(view, "view-dtype.png", [0], ["fp8_bf16_mlp.dtype.json"], panes=False)
        _shot(view, "view-compare.png", [0, 1], ["fp8_bf16_mlp.changed.json", "fp8_bf16_mlp.after.changed.json"], True)
        _shot(view, "view-error.png", [0], ["fp8_bf16_mlp.propagated-error.json"], panes=False)


@pytest.mark.slow
def test_a_jax_dump_with_fusions_and_a_while_loop(jax_dump: dict[str, Path]) -> None:
    require_browser()
    require_model_explorer()
    with running_view(jax_dump["txt"]) as view:
        counts, errors = _shown_counts(view)
        assert counts == [_count(jax_dump["txt"])]
        assert not _page_errors(errors)
        _check_dtype_overlays(view)
        command = {
            "extensionId": "hloopt_hlo",
            "cmdId": "convert",
            "modelPath": str(jax_dump["pb"]),
            "settings": {},
            "deleteAfterConversion": False,
        }
        (graph,) = view.post("/apipost/v1/send_command", command)["graphs"]  # the adapter in the server
        assert len(graph["nodes"]) == _count(jax_dump["pb"])
        assert any("/fused_computation" in node["namespace"] for node in graph["nodes"])


def chain_module(instructions: int) -> str:
    """A chain of `instructions` elementwise ops, a hundred to an op_name layer, ten layers to a block."""
    lines = [f"HloModule chain_{instructions}", "", "ENTRY %e (x: f32[8]) -> f32[8] {", "  %x = f32[8] parameter(0)"]
    previous = "x"
    for i in range(1, instructions):
        layer = i // 100
        opcode = ("add", "multiply", "subtract", "maximum")[i % 4]
        root = "ROOT " if i == instructions - 1 else ""
        scope = f"jit(f)/block_{layer // 10}/layer_{layer}/{opcode}"
        lines.append(f'  {root}%v{i} = f32[8] {opcode}(%{previous}, %x), metadata={{op_name="{scope}"}}')
        previous = f"v{i}"
    return "\n".join([*lines, "}", ""])


@pytest.mark.slow
def test_a_50000_instruction_module(tmp_path: Path) -> None:
    require_browser()
    require_model_explorer()
    path = tmp_path / "chain.hlo"
    path.write_text(chain_module(50_000))
    with running_view(path) as view:
        counts, errors = _shown_counts(view, wait=600)
        assert counts == [50_000]
        assert not _page_errors(errors)
        _check_dtype_overlays(view)
