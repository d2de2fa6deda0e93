"""StableHLO (MLIR text, what jax's ``.lower().as_text()`` prints) is recognised and read through jaxlib."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_invoke import invoke
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


@pytest.mark.slow
def test_stdin_and_a_directory_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    piped = runner.invoke(main, ["run", "-"], input=STABLEHLO)
    assert piped.exit_code == 0 and "sine(" in piped.stdout
    Path("in").mkdir()
    Path("in/f.hlo").write_text(STABLEHLO)  # the extension says HLO, the content says StableHLO
    batch = runner.invoke(main, ["run", "in", "-o", "out"])
    assert batch.exit_code == 0, batch.stderr
    # A batch keeps each module's format, and names its output for it: protobuf or MLIR in a file named
    # .hlo is a file hloopt would read as broken HLO text.
    assert sorted(p.name for p in Path("out").iterdir()) == ["f.mlir"]
    assert "stablehlo.sine" in Path("out/f.mlir").read_text()
    as_hlo = runner.invoke(main, ["run", "in", "-o", "hlo-out", "--output-format", "hlo"])
    assert as_hlo.exit_code == 0 and "sine(" in Path("hlo-out/f.hlo").read_text()


#: StableHLO XLA refuses, how it is written, and where MLIR's error is (line, column, message).
_REFUSED = [
    (
        "undeclared",
        STABLEHLO.replace("stablehlo.sine %arg0", "stablehlo.sine %arg1"),
        (3, STABLEHLO.splitlines()[2].index("%arg0") + 1, "use of undeclared SSA value name"),
    ),
    (
        "cut short",
        STABLEHLO[: STABLEHLO.index("tensor<3xf32>\n") + 4],
        (3, STABLEHLO.splitlines()[2].index(" tensor") + 1, "expected non-function type"),
    ),
    (
        "dynamic shape",
        hlo("""
            module @m {
              func.func public @main(%arg0: tensor<?xf32>, %arg1: tensor<1xi64>) -> tensor<?xf32> {
                %0 = stablehlo.dynamic_broadcast_in_dim %arg0, %arg1, dims = [0] : (tensor<?xf32>, tensor<1xi64>) -> tensor<?xf32>
                return %0 : tensor<?xf32>
              }
            }
            """),
        (3, 10, "'stablehlo.dynamic_broadcast_in_dim' op can't be translated to XLA HLO"),
    ),
]


@pytest.mark.parametrize(("text", "where"), [(t, w) for _, t, w in _REFUSED], ids=[n for n, _, _ in _REFUSED])
def test_refused_stablehlo_is_located_in_the_file(tmp_path: Path, text: str, where: tuple[int, int, str]) -> None:
    """MLIR's ``-:L:C: error: …`` becomes ``FILE:L:C: message``, the line and a caret, as for HLO text;
    its notes and the generic "Failed to parse using StableHLO" line are left out."""
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    line, column, message = where
    result = invoke("run", path)
    assert result.exit_code == 2
    first, source, caret = result.stderr.splitlines()
    assert first == f"hloopt: error: {path}:{line}:{column}: {message}"
    assert source == "  " + text.splitlines()[line - 1]
    assert caret == " " * (column + 1) + "^"


def test_refused_stablehlo_on_stdin_is_located_in_stdin() -> None:
    result = CliRunner().invoke(main, ["run", "-"], input=_REFUSED[0][1])
    assert result.exit_code == 2
    line, column, message = _REFUSED[0][2]
    assert result.stderr.startswith(f"hloopt: error: <stdin>:{line}:{column}: {message}\n")


def test_an_error_at_a_loc_elsewhere_names_that_place(tmp_path: Path) -> None:
    """A ``loc("model.py":4:2)`` is not a place in the file: it is named, and no line is shown."""
    path = tmp_path / "loc.mlir"
    path.write_text(
        STABLEHLO.replace(
            "%0 = stablehlo.sine %arg0 : tensor<3xf32>",
            '%0 = stablehlo.add %arg0, %arg0 : (tensor<3xf32>, tensor<3xf32>) -> tensor<2xf32> loc("model.py":4:2)\n'
            "    %1 = stablehlo.reshape %0 : (tensor<2xf32>) -> tensor<3xf32>",
        ).replace("return %0", "return %1")
    )
    result = invoke("run", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"hloopt: error: {path}: StableHLO that XLA cannot convert to HLO: 'stablehlo.add'")
    assert result.stderr.rstrip().endswith("(at model.py:4:2)")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("cut", [4, 20, 100, -1])
def test_cut_bytecode_is_one_clear_line(tmp_path: Path, cut: int) -> None:
    """Bytecode has no lines: ``FILE: message``, with no ``-:0:0`` and none of MLIR's notes."""
    import jax
    import jax.numpy as jnp

    exported = jax.export.export(jax.jit(lambda x: x + 1))(jax.ShapeDtypeStruct((2,), jnp.float32))
    data = exported.mlir_module_serialized
    path = tmp_path / "cut.mlirbc"
    path.write_bytes(data[:cut])
    result = invoke("run", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"hloopt: error: {path}: StableHLO bytecode that XLA cannot read: ")
    assert len(result.stderr.splitlines()) == 1
    assert "-:0:0" not in result.stderr
    assert "produced by" not in result.stderr
