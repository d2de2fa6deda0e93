"""StableHLO (MLIR text, what jax's ``.lower().as_text()`` prints) is recognised and read through jaxlib."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from hlo_text import hlo

from hloopt.cli.main import main
from hloopt.support.formats import Format, detect

STABLEHLO = hlo("""
    module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
      func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = "result"}) {
        %0 = stablehlo.sine %arg0 : tensor<3xf32>
        return %0 : tensor<3xf32>
      }
    }
    """)
HLO = hlo("""
    HloModule m
    ENTRY e {
      ROOT p = f32[3] parameter(0)
    }
    """)


@pytest.mark.parametrize(
    "text",
    [
        STABLEHLO,
        "// jax dump\n\n  " + STABLEHLO,
        "module {\n  func.func @main() {\n    return\n  }\n}\n",
        "module attributes {} {\n}\n",
        "module {}\n",
        "func.func @main() {\n  return\n}\n",
        '#loc = loc("x.py":1:0)\nmodule @m {\n}\n',
        '"builtin.module"() ({\n}) : () -> ()\n',
    ],
)
def test_mlir_text_is_recognised_by_its_content(text: str) -> None:
    assert detect("f.txt", text.encode()) is Format.STABLEHLO


@pytest.mark.parametrize(
    "text",
    [
        HLO,
        "module {\n  ROOT p = f32[] parameter(0)\n}\n",
        "HloModule module\nENTRY module {\n  ROOT p = f32[] parameter(0)\n}\n",
    ],
)
def test_hlo_text_is_not_mistaken_for_mlir(tmp_path: Path, text: str) -> None:
    """``module {`` followed by instructions is HLO: a computation named module."""
    path = tmp_path / "m.hlo"
    path.write_text(text)
    assert detect(str(path), text.encode()) is Format.HLO
    assert CliRunner().invoke(main, ["run", str(path)]).exit_code == 0


@pytest.mark.parametrize("command", [["run"], ["run", "--passes", "all"], ["exec"], ["compare", "m.mlir"]])
def test_every_command_that_reads_a_module_reads_stablehlo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.mlir").write_text(STABLEHLO)
    Path("f.mlir").write_text(STABLEHLO)
    result = CliRunner().invoke(main, [*command, "f.mlir"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    if command[0] == "run":
        assert "sine(" in result.stdout


def test_stdin_and_a_directory_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    piped = runner.invoke(main, ["run", "-"], input=STABLEHLO)
    assert piped.exit_code == 0 and "sine(" in piped.stdout
    Path("in").mkdir()
    Path("in/f.hlo").write_text(STABLEHLO)  # the extension says HLO, the content says StableHLO
    batch = runner.invoke(main, ["run", "in", "-o", "out"])
    assert batch.exit_code == 0, batch.stderr
    assert "stablehlo.sine" in Path("out/f.hlo").read_text()  # a batch keeps each module's format
    as_hlo = runner.invoke(main, ["run", "in", "-o", "hlo-out", "--output-format", "hlo"])
    assert as_hlo.exit_code == 0 and "sine(" in Path("hlo-out/f.hlo").read_text()
