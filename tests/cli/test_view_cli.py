"""``hloopt view``: the files it writes, the address it prints, the server it starts and ends, its errors."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest
from cli_invoke import invoke
from processes import alive, wait_for
from viewer import require_model_explorer, running_view

from hloopt.cli.view import _stem
from hloopt.text.parser import parse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fp8_mlp.hlo"


def _count(path: Path) -> int:
    module = parse(path.read_text(), str(path))
    return sum(len(c.instructions) for c in module.computations)


@pytest.mark.slow
def test_the_before_and_after_graphs_are_served_in_two_panes(tmp_path: Path) -> None:
    require_model_explorer()
    out = tmp_path / "view"
    with running_view(EXAMPLE, "--passes", "all", "--out", out) as view:
        assert view.address.startswith("http://127.0.0.1:")
        data = view.page_data
        models = [m["url"] for m in data["models"]]
        assert models == [str(out / "fp8_mlp.json"), str(out / "fp8_mlp.after.json")]
        assert sorted(Path(p).name for p in data["nodeData"]) == sorted(
            f"fp8_mlp.{kind}.json" for kind in ("dtype", "after.dtype", "changed", "after.changed")
        )
        panes = data["uiState"]["paneStates"]
        assert [(p["selectedCollectionLabel"], p["selectedGraphId"]) for p in panes] == [
            ("fp8_mlp.json", "fp8_mlp"),
            ("fp8_mlp.after.json", "fp8_mlp after passes"),
        ]
        assert data["sync"] == {"mode": "match_node_id"}
        for url in models:  # as the server hands them to the page
            (graph,) = view.read_json(url)
            assert len(graph["nodes"]) == _count(EXAMPLE)
        (server,) = view.servers()
    assert view.process.returncode == 130
    wait_for(lambda: not alive(server), "the server outlived hloopt view", 30)
    assert (out / "fp8_mlp.json").is_file()  # --out is kept


@pytest.mark.slow
@pytest.mark.parametrize("ending", [signal.SIGINT, signal.SIGTERM])
def test_ending_hloopt_ends_the_server_and_removes_its_directory(ending: signal.Signals) -> None:
    require_model_explorer()
    with running_view(EXAMPLE) as view:
        directory = Path(view.page_data["models"][0]["url"]).parent
        assert directory.is_dir() and "uiState" not in view.page_data  # one graph, one pane
        (server,) = view.servers()
        view.process.send_signal(ending)
        view.process.wait(60)
    assert view.process.returncode == 128 + ending
    wait_for(lambda: not alive(server) and not directory.exists(), "the server or its directory outlived hloopt", 30)


@pytest.mark.slow
def test_a_port_in_use_is_an_error(tmp_path: Path) -> None:
    require_model_explorer()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("view", EXAMPLE, "--no-browser", "--port", port, "--out", tmp_path / "v")
    assert result.exit_code == 2
    assert f"port {port} of 127.0.0.1 is in use" in result.stderr


def test_a_bad_module_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %c = f32[] constant(\n}\n")
    out = tmp_path / "out"
    result = invoke("view", bad, "--no-browser", "--out", out)
    assert result.exit_code == 2
    assert f"{bad}:5:1: expected" in result.stderr and "^" in result.stderr
    assert not out.exists()  # nothing written, no server started


def test_trace_needs_a_second_side() -> None:
    result = invoke("view", EXAMPLE, "--trace", "--no-browser")
    assert result.exit_code == 2
    assert "--trace needs something to trace against" in result.stderr


@pytest.mark.parametrize(
    ("path", "stem"),
    [
        ("dir/m.hlo", "m"),
        ("m.hlo.pb", "m"),
        ("m.txt", "m"),
        ("m.mlirbc", "m"),
        ("run.snapshot.0.pb", "run.snapshot.0"),
        ("module_0006.jit_step.cpu_after_optimizations.txt", "module_0006.jit_step.cpu_after_optimizations"),
        (".pb", ".pb"),
        ("-", "stdin"),
    ],
)
def test_the_files_are_named_after_the_module_file(path: str, stem: str) -> None:
    assert _stem(path) == stem
