"""`hloopt run`, `exec` and `compare` read and write HloModuleProto and StableHLO as well as HLO text."""

from __future__ import annotations

from pathlib import Path

import pytest
import xla_workers
from click.testing import CliRunner
from conftest import sampled
from hlo_text import hlo
from xla_workers import on_worker_path

from hloopt.cli.main import main
from hloopt.support.formats import Format, detect
from hloopt.xla import formats
from hloopt.xla.bridge import canonical, isolated_call

MODULE = hlo(
    """
    HloModule m, replica_count=2
    ENTRY e {
      p = bf16[4] parameter(0)
      ROOT n = bf16[4] negate(p)
    }
    """
)


@pytest.fixture
def proto(tmp_path: Path) -> Path:
    data = formats.dump(MODULE, Format.PROTO)
    assert isinstance(data, bytes)
    path = tmp_path / "m.hlo_module.pb"
    path.write_bytes(data)
    return path


def test_run_reads_a_proto_and_writes_each_format_by_extension(tmp_path: Path, proto: Path) -> None:
    runner = CliRunner()
    for name, fmt in (("out.pb", Format.PROTO), ("out.mlir", Format.STABLEHLO), ("out.hlo", Format.HLO)):
        result = runner.invoke(main, ["run", str(proto), "--passes", "all", "-o", str(tmp_path / name)])
        assert result.exit_code == 0, result.stderr
        assert detect(name, (tmp_path / name).read_bytes()) is fmt
    text = formats.load(str(tmp_path / "out.pb")).text
    assert "f32[4]" in text  # upcast-all ran


def test_a_proto_output_names_what_it_loses(tmp_path: Path) -> None:
    source = tmp_path / "m.hlo"
    source.write_text(MODULE)
    result = CliRunner().invoke(main, ["run", str(source), "-o", str(tmp_path / "m.pb")])
    assert result.exit_code == 0
    assert "does not keep replica_count" in result.stderr


@pytest.mark.parametrize(
    "args", [["-o", "m.mlir"], ["-o", "m.out", "--output-format", "mlir"], ["--output-format", "mlir"]]
)
def test_a_stablehlo_output_says_what_it_loses_once_in_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    source = tmp_path / "m.hlo"
    source.write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(source), *args])
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("hloopt: warning: ")]
    assert len(warnings) == 1, result.stderr
    assert warnings[0].endswith(
        "this format does not keep instruction and computation names, instruction layouts or instruction order"
        " (XLA renames them and turns while bodies into regions, layouts other than the entry computation's fall"
        " back to the default, instructions follow their operands, and op_name metadata is added where there was"
        " none)"
    )


def test_output_format_overrides_the_extension_and_works_on_stdout(tmp_path: Path, proto: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "module.bin"
    assert runner.invoke(main, ["run", str(proto), "-o", str(out), "--output-format", "pb"]).exit_code == 0
    assert detect("x", out.read_bytes()) is Format.PROTO
    piped = runner.invoke(main, ["run", str(proto), "--output-format", "mlir"])
    assert piped.exit_code == 0 and "stablehlo.negate" in piped.stdout


def test_a_directory_keeps_each_module_format(tmp_path: Path, proto: Path) -> None:
    (tmp_path / "in").mkdir()
    proto.rename(tmp_path / "in" / "a.pb")
    (tmp_path / "in" / "b.hlo").write_text(MODULE)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--passes", "all"])
    assert result.exit_code == 0, result.stderr
    assert detect("a.pb", (tmp_path / "out" / "a.pb").read_bytes()) is Format.PROTO
    assert (tmp_path / "out" / "b.hlo").read_text().startswith("HloModule m")


def test_exec_and_compare_take_protos(tmp_path: Path, proto: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(main, ["exec", str(proto)]).exit_code == 0
    text = tmp_path / "m.hlo"
    text.write_text(MODULE)
    compared = runner.invoke(main, ["compare", str(proto), str(text)])
    assert compared.exit_code == 0, compared.stderr
    assert canonical(formats.load(str(proto)).text) == canonical(
        formats.load(str(text)).text.replace(", replica_count=2", "")
    )


@pytest.mark.parametrize(
    "name, data",
    [("t.pb", "truncated"), ("x.pb", b"\x08\x01\x10\x02"), ("x.bin", b"\x89PNG\r\n\x1a\n....")],
    ids=["a truncated proto", "a proto that is not HLO", "an image"],
)
def test_a_file_that_is_no_module_exits_2_without_a_traceback(tmp_path: Path, name: str, data: str | bytes) -> None:
    if data == "truncated":
        full = formats.dump(MODULE, Format.PROTO)
        assert isinstance(full, bytes)
        data = full[: len(full) // 3]
    assert isinstance(data, bytes)
    (tmp_path / name).write_bytes(data)
    for command in (["run"], ["exec"]):
        result = CliRunner().invoke(main, [*command, str(tmp_path / name)])
        assert result.exit_code == 2
        assert result.stderr.startswith("hloopt: error: ") and "Traceback" not in result.stderr


def tree(root: Path) -> dict[str, Format]:
    """Each file below `root` and the format its bytes hold."""
    return {
        path.relative_to(root).as_posix(): detect(path.name, path.read_bytes())
        for path in root.rglob("*")
        if path.is_file()
    }


@pytest.fixture
def mixed(tmp_path: Path, proto: Path) -> Path:
    """A directory of a module in each format hloopt reads, one of them in a subdirectory."""
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    proto.rename(root / "a.pb")
    (root / "sub" / "b.hlo").write_text(MODULE)
    (root / "c.mlir").write_text(
        CliRunner().invoke(main, ["run", str(root / "a.pb"), "--output-format", "mlir"]).stdout
    )
    return root


@pytest.mark.parametrize(
    ("output_format", "expected"),
    sampled(
        [
            (None, {"a.pb": Format.PROTO, "sub/b.hlo": Format.HLO, "c.mlir": Format.STABLEHLO}),
            ("pb", {"a.pb": Format.PROTO, "sub/b.pb": Format.PROTO, "c.pb": Format.PROTO}),
            ("mlir", {"a.mlir": Format.STABLEHLO, "sub/b.mlir": Format.STABLEHLO, "c.mlir": Format.STABLEHLO}),
            ("hlo", {"a.hlo": Format.HLO, "sub/b.hlo": Format.HLO, "c.hlo": Format.HLO}),
        ],
        2,
        unpack=True,
    ),
)
def test_a_directory_s_outputs_are_named_for_the_format_written(
    tmp_path: Path, mixed: Path, output_format: str | None, expected: dict[str, Format]
) -> None:
    """Protobuf in a file named .hlo is a file hloopt cannot read back (issue 28 item 11)."""
    out = tmp_path / "out"
    chosen = [] if output_format is None else ["--output-format", output_format]
    result = CliRunner().invoke(main, ["run", str(mixed), "-o", str(out), *chosen])
    assert result.exit_code == 0, result.stderr
    assert tree(out) == expected
    again = CliRunner().invoke(main, ["run", str(out), "--check"])  # and hloopt reads every one back
    assert again.exit_code == 0, again.stderr


@pytest.mark.slow
def test_bytecode_is_written_as_mlir_text_named_mlir(
    tmp_path: Path, proto: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "in"
    root.mkdir()
    stablehlo = CliRunner().invoke(main, ["run", str(proto), "--output-format", "mlir"]).stdout
    on_worker_path(monkeypatch)
    (root / "m.mlirbc").write_bytes(isolated_call(xla_workers.bytecode, stablehlo))
    result = CliRunner().invoke(main, ["run", str(root), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.stderr
    assert tree(tmp_path / "out") == {"m.mlir": Format.STABLEHLO}


def test_two_inputs_that_would_write_one_output_are_refused(tmp_path: Path, mixed: Path) -> None:
    (mixed / "a.hlo").write_text(MODULE)  # beside a.pb: both would be out/a.pb
    result = CliRunner().invoke(main, ["run", str(mixed), "-o", str(tmp_path / "out"), "--output-format", "pb"])
    assert result.exit_code == 2
    assert result.stderr == (
        f"hloopt: error: {tmp_path / 'out' / 'a.pb'}: would be written from both {mixed / 'a.hlo'} and "
        f"{mixed / 'a.pb'}\n"
    )
    assert tree(tmp_path / "out") == {}


def test_in_place_refuses_a_format_its_file_names_do_not_say(tmp_path: Path, mixed: Path) -> None:
    before = tree(mixed)
    result = CliRunner().invoke(main, ["run", str(mixed), "--in-place", "--passes", "all", "--output-format", "pb"])
    assert result.exit_code == 1  # a batch: each refused file fails, the summary says so
    assert "sub/b.hlo: --in-place keeps each file's name, which does not say pb" in result.stderr
    assert tree(mixed) == before
