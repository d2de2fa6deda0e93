"""MLIR text (StableHLO, what jax's ``.lower().as_text()`` prints) is named as such, with the way to get HLO."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hlo_text import hlo

from hloopt import parse
from hloopt.cli.main import main
from hloopt.errors import HloParseError
from hloopt.support.fileio import HLO_FROM_JAX, read_hlo

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
SAYS = f"this is MLIR (StableHLO) text, not HLO text; hloopt reads HLO text, which jax prints with {HLO_FROM_JAX}"


@pytest.mark.parametrize(
    "text, line, column",
    [
        (STABLEHLO, 1, 1),
        ("// jax dump\n\n  " + STABLEHLO, 3, 3),
        ("module {\n  func.func @main() {\n    return\n  }\n}\n", 1, 1),
        ("module attributes {} {\n}\n", 1, 1),
        ("module {}\n", 1, 1),
        ("func.func @main() {\n  return\n}\n", 1, 1),
        ('#loc = loc("x.py":1:0)\nmodule @m {\n}\n', 1, 1),
        ('"builtin.module"() ({\n}) : () -> ()\n', 1, 1),
    ],
)
def test_mlir_text_is_recognised_before_parsing(tmp_path: Path, text: str, line: int, column: int) -> None:
    path = tmp_path / "f.mlir"
    path.write_text(text)
    with pytest.raises(HloParseError) as caught:
        read_hlo(str(path))
    assert caught.value.message == SAYS
    assert (caught.value.location.line, caught.value.location.column) == (line, column)


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
    assert read_hlo(str(path)) == text
    assert CliRunner().invoke(main, ["run", str(path)]).exit_code == 0


@pytest.mark.parametrize("command", [["run"], ["run", "--passes", "all"], ["exec"], ["compare", "m.hlo"]])
def test_every_command_that_reads_a_module_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.hlo").write_text(HLO)
    Path("f.mlir").write_text(STABLEHLO)
    result = CliRunner().invoke(main, [*command, "f.mlir"], catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr == f"hloopt: error: f.mlir:1:1: {SAYS}\n  {STABLEHLO.splitlines()[0]}\n  ^\n"


def test_stdin_and_a_directory_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    piped = runner.invoke(main, ["run", "-"], input=STABLEHLO)
    assert piped.exit_code == 2 and piped.stderr.startswith(f"hloopt: error: <stdin>:1:1: {SAYS}\n")
    Path("in").mkdir()
    Path("in/f.hlo").write_text(STABLEHLO)
    batch = runner.invoke(main, ["run", "in", "--check"])
    assert batch.exit_code == 1 and f"hloopt: error: in/f.hlo:1:1: {SAYS}\n" in batch.stderr


def test_the_advice_is_what_jax_does() -> None:
    """The expression the message quotes gives HLO text that hloopt reads (jax 0.10's Lowered API).

    In a subprocess: jax stays out of the test process, whose batch tests fork.
    """
    pytest.importorskip("jax")
    program = (
        f"import jax, jax.numpy as jnp\nf, args = jnp.sin, (jnp.ones(3, jnp.float32),)\nprint({HLO_FROM_JAX}, end='')\n"
    )
    made = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300)
    assert parse(made.stdout).entry is not None
