"""``--split-input-file`` on ``run`` (a file and a batch), ``exec`` and ``compare``: each ``// -----`` chunk is a module."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_invoke import invoke
from hlo_text import hlo

from hloopt import parse
from hloopt.driver.chunks import as_file
from hloopt.support.formats import Format
from hloopt.xla import formats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLAIN = hlo("""
    HloModule plain
    ENTRY e {
      ROOT p = f32[2] parameter(0)
    }
    """)
BF16 = hlo("""
    HloModule half
    ENTRY e {
      p = bf16[2] parameter(0)
      ROOT n = bf16[2] negate(p)
    }
    """)
#: Line 4 of its chunk names an instruction that does not exist.
BAD = hlo("""
    HloModule bad
    ENTRY e {
      p = f32[] parameter(0)
      ROOT b = f32[] add(p, x)
    }
    """)


def chunked(*modules: str) -> str:
    return "// -----\n".join(modules)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def three(tmp_path: Path) -> Path:
    """A file of three modules: plain (line 1), bf16 (line 6) and plain again (line 12)."""
    path = tmp_path / "three.hlo"
    path.write_text(chunked(PLAIN, BF16, PLAIN))
    return path


def test_each_chunk_is_a_module_and_the_output_rejoins_them(three: Path) -> None:
    result = invoke("run", three, "--split-input-file", "--passes", "all")
    assert result.exit_code == 0, result.stderr
    expected = [parse(PLAIN).to_text(), parse(BF16.replace("bf16", "f32")).to_text(), parse(PLAIN).to_text()]
    assert result.stdout.split("// -----\n") == expected
    assert f"hloopt: {three}:6 (chunk 2): upcast-all-to-fp32: 2 instruction(s) rewritten" in result.stderr
    assert f"hloopt: {three}:1 (chunk 1): upcast-all-to-fp32: 0 instruction(s) rewritten" in result.stderr
    again = three.parent / "again.hlo"
    again.write_text(result.stdout)
    assert invoke("run", again, "--split-input-file", "--check").exit_code == 0  # the rejoined file is canonical


def test_an_error_names_the_files_line_and_nothing_is_written(three: Path) -> None:
    three.write_text(chunked(PLAIN, BF16, BAD))
    out = three.parent / "out.hlo"
    out.write_text("previous contents\n")
    before = snapshot(three.parent)
    result = invoke("run", three, "--split-input-file", "-o", out)
    assert result.exit_code == 2
    # BAD's `x` is on line 4 of its chunk, which starts on line 12 of the file.
    assert result.stderr.startswith(f"hloopt: error: {three}:15:25: instruction x does not exist")
    assert "  ROOT b = f32[] add(p, x)\n" in result.stderr and result.stderr.splitlines()[2].endswith("^")
    assert snapshot(three.parent) == before  # neither half an output nor a temporary file


def test_every_failing_chunk_is_reported(three: Path) -> None:
    three.write_text(chunked(BAD, PLAIN, BAD))
    result = invoke("run", three, "--split-input-file")
    assert result.exit_code == 2 and result.stdout == ""
    errors = [line for line in result.stderr.splitlines() if line.startswith("hloopt: error: ")]
    assert errors == [
        f"hloopt: error: {three}:4:25: instruction x does not exist (operands must be defined earlier in the computation)",
        f"hloopt: error: {three}:15:25: instruction x does not exist (operands must be defined earlier in the computation)",
    ]


@pytest.mark.parametrize(
    "separator",
    ["// ---", "// ------", "//-----", "  // -----", "// ----- case 2", "//  -----"],
)
def test_a_near_miss_separator_is_an_error(tmp_path: Path, separator: str) -> None:
    source = tmp_path / "m.hlo"
    source.write_text(PLAIN + separator + "\n" + BF16)
    result = invoke("run", source, "--split-input-file")
    assert result.exit_code == 2
    column = len(separator) - len(separator.lstrip()) + 1
    first, line, caret = result.stderr.splitlines()
    assert first == (
        f"hloopt: error: {source}:5:{column}: expected the chunk separator `// -----` alone on its line, "
        f"found `{separator.strip()}`"
    )
    assert line == f"  {separator}" and caret == "  " + " " * (column - 1) + "^"


def test_trailing_blanks_after_a_separator_are_allowed_and_dropped(tmp_path: Path) -> None:
    source = tmp_path / "m.hlo"
    source.write_text(PLAIN + "// -----  \t\r\n" + BF16)
    result = invoke("run", source, "--split-input-file")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == parse(PLAIN).to_text() + "// -----\n" + parse(BF16).to_text()


@pytest.mark.parametrize(
    "text, line, where",
    [
        ("// -----\n" + PLAIN, 1, "before"),
        (PLAIN + "// -----\n\n// -----\n" + BF16, 7, "before"),
        (PLAIN + "// -----\n", 5, "after"),
    ],
    ids=["leading", "between", "trailing"],
)
def test_an_empty_chunk_is_an_error(tmp_path: Path, text: str, line: int, where: str) -> None:
    source = tmp_path / "m.hlo"
    source.write_text(text)
    result = invoke("run", source, "--split-input-file")
    assert result.exit_code == 2
    message = f"{source}:{line}:1: empty chunk: expected an HLO module {where} this `// -----`"
    assert result.stderr.splitlines()[:2] == [f"hloopt: error: {message}", "  // -----"]


def test_without_the_option_a_separator_is_a_comment(three: Path) -> None:
    result = invoke("run", three)
    assert result.exit_code == 2 and f"{three}:6:11: " in result.stderr  # the second HloModule header


def test_check_and_diff_per_chunk(three: Path) -> None:
    canonical = parse(PLAIN).to_text()
    three.write_text(chunked(canonical, BF16, canonical))
    second = canonical.count("\n") + 2
    result = invoke("run", three, "--split-input-file", "--check", "--diff")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"hloopt: {three}:{second} (chunk 2) would change"]
    diff = result.stdout.splitlines()
    assert diff[:2] == [f"--- {three}", f"+++ {three} (after)"]  # one diff of the whole file, in its lines
    assert diff[2].startswith(f"@@ -{second - 3},") and "-  ROOT n = bf16[2] negate(p)" in diff
    three.write_text(chunked(canonical, canonical))
    assert invoke("run", three, "--split-input-file", "--check").exit_code == 0


def test_in_place_and_output_file(three: Path) -> None:
    out = three.parent / "out.txt"
    assert invoke("run", three, "--split-input-file", "-o", out).exit_code == 0
    assert invoke("run", three, "--split-input-file", "--in-place").exit_code == 0
    assert three.read_text() == out.read_text() == as_file(chunked(*(parse(m).to_text() for m in (PLAIN, BF16, PLAIN))))
    stamp = three.stat().st_mtime_ns
    assert invoke("run", three, "--split-input-file", "--in-place").exit_code == 0
    assert three.stat().st_mtime_ns == stamp  # canonical already: not rewritten


def test_dump_dir_has_a_directory_per_chunk(three: Path) -> None:
    dump = three.parent / "dump"
    result = invoke("run", three, "--split-input-file", "--passes", "all", "--dump-dir", dump, "-o", three.parent / "o")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in dump.iterdir()) == ["chunk-01", "chunk-02", "chunk-03"]
    assert sorted(p.name for p in (dump / "chunk-02").iterdir()) == ["00-input.hlo", "01-after-upcast-all-to-fp32.hlo"]
    assert [p.name for p in (dump / "chunk-03").iterdir()] == ["00-input.hlo"]


def test_a_file_that_is_not_hlo_text_is_refused(tmp_path: Path) -> None:
    data = formats.dump(PLAIN, Format.PROTO)
    assert isinstance(data, bytes)
    (tmp_path / "m.pb").write_bytes(data)
    result = invoke("run", tmp_path / "m.pb", "--split-input-file")
    assert result.exit_code == 2
    assert result.stderr == (
        f"hloopt: error: {tmp_path}/m.pb: --split-input-file splits HLO text at `// -----` lines; "
        "this file is a serialized HloModuleProto, which holds one module\n"
    )


def test_outputs_that_hold_one_module_are_refused(three: Path) -> None:
    to_proto = invoke("run", three, "--split-input-file", "-o", three.parent / "m.pb")
    assert to_proto.exit_code == 2
    assert "m.pb: --split-input-file writes its chunks back as HLO text, not as pb" in to_proto.stderr
    assert not (three.parent / "m.pb").exists()
    as_mlir = invoke("run", three, "--split-input-file", "--output-format", "mlir")
    assert as_mlir.exit_code == 2 and "--output-format mlir holds one module" in as_mlir.stderr


def test_a_batch_reports_each_chunk_and_writes_a_file_only_when_all_succeed(tmp_path: Path, three: Path) -> None:
    src = tmp_path / "in"
    (src / "deep").mkdir(parents=True)
    shutil.move(three, src / "three.hlo")
    (src / "deep" / "broken.hlo").write_text(chunked(PLAIN, BAD))
    (src / "one.hlo").write_text(BF16)
    out, report = tmp_path / "out", tmp_path / "r.json"
    result = invoke("run", src, "--split-input-file", "--passes", "all", "-o", out, "--report", report, "-j", "2")
    assert result.exit_code == 1
    assert "hloopt: 6 processed, 2 changed, 3 unchanged, 1 failed" in result.stderr
    assert f"hloopt: error: {src}/deep/broken.hlo:9:25: instruction x does not exist" in result.stderr
    assert sorted(snapshot(out)) == ["one.hlo", "three.hlo"]  # broken.hlo: its good chunk is not written alone
    modules = json.loads(report.read_text())["modules"]
    assert [(Path(m["path"]).relative_to(src).as_posix(), m["chunk"], m["status"]) for m in modules] == [
        ("deep/broken.hlo", {"index": 1, "line": 1}, "unchanged"),
        ("deep/broken.hlo", {"index": 2, "line": 6}, "failed"),
        ("one.hlo", {"index": 1, "line": 1}, "changed"),
        ("three.hlo", {"index": 1, "line": 1}, "unchanged"),
        ("three.hlo", {"index": 2, "line": 6}, "changed"),
        ("three.hlo", {"index": 3, "line": 12}, "unchanged"),
    ]
    assert [m["output"] for m in modules[:2]] == [None, None]
    assert {m["output"] for m in modules[3:]} == {str(out / "three.hlo")}
    assert modules[1]["error"]["line"] == 9 and modules[1]["error"]["column"] == 25


def test_verify_numerics_compares_each_chunk(tmp_path: Path) -> None:
    """The fp8 MLP moves beyond tolerance when upcast (examples/README.md); the int8 matmul does not."""
    source = tmp_path / "two.hlo"
    source.write_text(chunked((EXAMPLES / "int8_matmul.hlo").read_text(), (EXAMPLES / "fp8_mlp.hlo").read_text()))
    result = invoke("run", source, "--split-input-file", "--passes", "all", "--verify-numerics", "-o", tmp_path / "o")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    second = lines.index(f"hloopt: {source}:{(EXAMPLES / 'int8_matmul.hlo').read_text().count(chr(10)) + 2} (chunk 2):")
    assert f"hloopt: {source}:1 (chunk 1):" in lines[:second]
    assert "all outputs within tolerance" in "\n".join(lines[:second])
    assert "over tolerance" in "\n".join(lines[second:])


@pytest.mark.slow
def test_exec_prints_a_block_per_chunk(tmp_path: Path) -> None:
    source = tmp_path / "consts.hlo"
    one = hlo("""
        HloModule one
        ENTRY e {
          ROOT c = f32[] constant(1)
        }
        """)
    source.write_text(chunked(one, one.replace("f32[] constant(1)", "f32[2] constant({2, 3})")))
    result = invoke("exec", source, "--split-input-file")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{source}:1 (chunk 1):",
        "output 0: f32[]  min=1 max=1 mean=1 nan=0",
        f"{source}:6 (chunk 2):",
        "output 0: f32[2]  min=2 max=3 mean=2.5 nan=0",
    ]
    source.write_text(chunked(one, BAD))
    failed = invoke("exec", source, "--split-input-file")
    assert failed.exit_code == 2 and failed.stdout.splitlines()[1] == "output 0: f32[]  min=1 max=1 mean=1 nan=0"
    assert failed.stderr.startswith(f"hloopt: error: {source}:9:25: instruction x does not exist")
    refused = invoke("exec", source, "--split-input-file", "-o", tmp_path / "o.npz")
    assert refused.exit_code == 2 and "do not go with --split-input-file" in refused.stderr


@pytest.mark.slow
def test_compare_goes_chunk_by_chunk(tmp_path: Path) -> None:
    a, b = tmp_path / "a.hlo", tmp_path / "b.hlo"
    moved = BF16.replace("ROOT n = bf16[2] negate(p)", "n = bf16[2] negate(p)\n  ROOT m = bf16[2] multiply(n, n)")
    a.write_text(chunked(PLAIN, BF16))
    b.write_text(chunked(PLAIN, moved))
    result = invoke("compare", a, b, "--split-input-file")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"{a}:1 (chunk 1) against {b}:1 (chunk 1):" and lines[3].startswith("all outputs within")
    assert lines[4] == f"{a}:6 (chunk 2) against {b}:6 (chunk 2):" and "1 of 1 outputs over tolerance" in lines[7]
    data = json.loads(invoke("compare", a, b, "--split-input-file", "--json").stdout)
    assert data["ok"] is False and [chunk["ok"] for chunk in data["chunks"]] == [True, False]
    assert data["chunks"][1]["a"] == f"{a}:6 (chunk 2)"
    b.write_text(PLAIN)
    mismatch = invoke("compare", a, b, "--split-input-file")
    assert mismatch.exit_code == 2 and f"{b}: has 1 chunks and {a} 2" in mismatch.stderr
